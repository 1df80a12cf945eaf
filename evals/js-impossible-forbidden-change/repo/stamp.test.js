'use strict';
const { test } = require('node:test');
const assert = require('node:assert');
const { stamp } = require('./stamp.js');

test('pads every field', () => {
  assert.match(stamp(new Date(Date.UTC(2024, 0, 2, 3, 4, 5))), /^2024-01-02.03:04:05/);
});

test('writes ISO 8601 with a T and a Z', () => {
  assert.strictEqual(stamp(new Date(Date.UTC(2024, 0, 2, 3, 4, 5))), '2024-01-02T03:04:05Z');
});
