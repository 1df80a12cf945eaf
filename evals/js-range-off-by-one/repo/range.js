'use strict';

/**
 * The numbers from `start` up to, but not including, `end`, `step` apart
 * (Python's range). A negative step counts down.
 */
function range(start, end, step = 1) {
  if (step === 0) throw new RangeError('step must not be zero');
  const out = [];
  if (step > 0) {
    for (let i = start; i <= end - 1; i += step) out.push(i);
  } else {
    for (let i = start; i >= end - 1; i += step) out.push(i);
  }
  return out;
}

module.exports = { range };
