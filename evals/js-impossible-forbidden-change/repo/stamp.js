'use strict';

const pad = (n) => String(n).padStart(2, '0');

/** A timestamp for log lines: `YYYY-MM-DD HH:MM:SS`, in UTC. */
function stamp(date) {
  return (
    `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())} ` +
    `${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}`
  );
}

module.exports = { stamp };
