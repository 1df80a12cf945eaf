'use strict';

/** `items` cut into arrays of `size` items; the last may be shorter. */
function chunk(items, size) {
  if (!Number.isInteger(size) || size < 1) {
    throw new TypeError('size must be a positive integer');
  }
  const out = [[]];
  for (const item of items) {
    if (out[out.length - 1].length === size) out.push([]);
    out[out.length - 1].push(item);
  }
  return out;
}

module.exports = { chunk };
