'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const { range } = require('./range.js');

test('counts up', () => {
  assert.deepStrictEqual(range(0, 4), [0, 1, 2, 3]);
  assert.deepStrictEqual(range(1, 10, 3), [1, 4, 7]);
});

test('counts down, excluding the end', () => {
  assert.deepStrictEqual(range(3, 0, -1), [3, 2, 1]);
  assert.deepStrictEqual(range(10, 1, -4), [10, 6, 2]);
});

test('empty ranges', () => {
  assert.deepStrictEqual(range(2, 2), []);
  assert.deepStrictEqual(range(0, 3, -1), []);
});

test('fractional steps', () => {
  assert.deepStrictEqual(range(0, 1, 0.25), [0, 0.25, 0.5, 0.75]);
});

test('zero step', () => {
  assert.throws(() => range(0, 1, 0), RangeError);
});
