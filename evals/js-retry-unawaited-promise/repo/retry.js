'use strict';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `fn` until it resolves, at most `attempts` times, waiting `delayMs`
 * between tries. Rejects with the last error when every try failed.
 */
async function retry(fn, { attempts = 3, delayMs = 0 } = {}) {
  let lastError;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      return fn(attempt);
    } catch (error) {
      lastError = error;
      if (attempt < attempts) await sleep(delayMs);
    }
  }
  throw lastError;
}

module.exports = { retry };
