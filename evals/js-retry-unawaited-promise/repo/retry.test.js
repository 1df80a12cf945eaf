'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const { retry } = require('./retry.js');

function failing(times) {
  let calls = 0;
  const fn = async () => {
    calls += 1;
    if (calls <= times) throw new Error(`failure ${calls}`);
    return 'ok';
  };
  return { fn, calls: () => calls };
}

test('succeeds at once', async () => {
  const { fn, calls } = failing(0);
  assert.strictEqual(await retry(fn), 'ok');
  assert.strictEqual(calls(), 1);
});

test('retries async failures', async () => {
  const { fn, calls } = failing(2);
  assert.strictEqual(await retry(fn, { attempts: 3 }), 'ok');
  assert.strictEqual(calls(), 3);
});

test('gives up with the last error', async () => {
  const { fn, calls } = failing(5);
  await assert.rejects(retry(fn, { attempts: 2 }), /failure 2/);
  assert.strictEqual(calls(), 2);
});

test('retries synchronous throws too', async () => {
  let calls = 0;
  const fn = () => {
    calls += 1;
    if (calls === 1) throw new Error('sync');
    return 7;
  };
  assert.strictEqual(await retry(fn), 7);
});
