'use strict';
const { describe, it } = require('node:test');
const assert = require('node:assert');
const { chunk } = require('../lib/chunk.js');

describe('chunk', () => {
  it('cuts evenly', () => {
    assert.deepStrictEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]]);
  });
  it('keeps a short last chunk', () => {
    assert.deepStrictEqual(chunk([1, 2, 3], 2), [[1, 2], [3]]);
  });
  it('gives no chunks for no items', () => {
    assert.deepStrictEqual(chunk([], 3), []);
  });
  it('takes any iterable', () => {
    assert.deepStrictEqual(chunk('abc', 2), [['a', 'b'], ['c']]);
  });
  it('refuses a bad size', () => {
    assert.throws(() => chunk([1], 0), TypeError);
  });
});
