import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { definedFields } from '../../src/util/definedFields.ts';

describe('definedFields', () => {
  test('undefined fields are left out, every other value kept (null, 0, false included)', () => {
    const out = definedFields({ a: 1, b: undefined, c: null, d: 0, e: false });
    assert.deepEqual(out, { a: 1, c: null, d: 0, e: false });
    assert.ok(!('b' in out));
  });

  test('spread over defaults, an undefined field keeps its default', () => {
    const defaults = { a: 1, b: 2 };
    assert.deepEqual({ ...defaults, ...definedFields({ a: undefined, b: 5 }) }, { a: 1, b: 5 });
  });
});
