/**
 * The proxy's header filter (`copyableHeaders`, RFC 9110 section 7.6.1): the fixed hop-by-hop
 * list and every field the message's own Connection header names are dropped, whatever their
 * case or spacing in that list, one Connection value or several; everything else passes as is.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { copyableHeaders } from '../../src/gateway/proxy.ts';

const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'transfer-encoding',
  'proxy-connection',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
];

describe('copyableHeaders', () => {
  test('drops the fixed list and the fields Connection names; keeps the rest', () => {
    const out = copyableHeaders({
      connection: 'keep-alive, X-Secret ,  x-other',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'x-secret': '1',
      'x-other': '2',
      'content-type': 'text/event-stream',
      'set-cookie': ['a=1', 'b=2'],
      'x-kept': '3',
    });
    assert.deepEqual(out, {
      'content-type': 'text/event-stream',
      'set-cookie': ['a=1', 'b=2'],
      'x-kept': '3',
    });
  });

  test('several Connection values are all read; undefined values are left out', () => {
    const out = copyableHeaders({
      connection: ['close', 'x-a'] as unknown as string,
      'x-a': '1',
      'x-b': undefined,
      date: 'Tue, 01 Dec 2026 00:00:00 GMT',
    });
    assert.deepEqual(out, { date: 'Tue, 01 Dec 2026 00:00:00 GMT' });
  });

  test('property: a header passes exactly when it is neither hop-by-hop nor named', () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
    fc.assert(
      fc.property(
        fc.dictionary(name, fc.string({ maxLength: 5 }), { maxKeys: 8 }),
        fc.array(name, { maxLength: 4 }),
        fc.subarray(HOP_BY_HOP),
        (plain, named, hop) => {
          const headers: Record<string, string> = { ...plain };
          for (const h of hop) headers[h] = 'x';
          if (named.length > 0) {
            headers.connection = named.map((n) => ` ${n.toUpperCase()} `).join(',');
          }
          const out = copyableHeaders(headers);
          for (const [k, v] of Object.entries(headers)) {
            const dropped = HOP_BY_HOP.includes(k) || named.includes(k);
            assert.equal(out[k], dropped ? undefined : v, k);
          }
          assert.ok(Object.keys(out).every((k) => k in headers));
        },
      ),
      { seed: 36 },
    );
  });
});
