import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { withDefaults } from '../../src/util/withDefaults.ts';

describe('withDefaults', () => {
  const defaults = { a: 1, b: 2, c: Number.POSITIVE_INFINITY };

  test('a given field replaces its default; absent, undefined and null keep it', () => {
    assert.deepEqual(withDefaults(defaults, { a: 5, b: undefined, c: null }), {
      a: 5,
      b: 2,
      c: Number.POSITIVE_INFINITY,
    });
    assert.deepEqual(withDefaults(defaults, {}), defaults);
  });

  test('zero is a value, not a missing field', () => {
    assert.deepEqual(withDefaults(defaults, { b: 0 }), { a: 1, b: 0, c: Number.POSITIVE_INFINITY });
  });

  test('fields outside the table are not read; neither argument changes', () => {
    const bag = { a: 7, other: 'x' };
    const out = withDefaults(defaults, bag);
    assert.deepEqual(out, { a: 7, b: 2, c: Number.POSITIVE_INFINITY });
    assert.ok(!('other' in out));
    assert.deepEqual(bag, { a: 7, other: 'x' });
    assert.deepEqual(defaults, { a: 1, b: 2, c: Number.POSITIVE_INFINITY });
    assert.notEqual(out, defaults);
  });
});
