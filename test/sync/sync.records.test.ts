/** The state sync's messages: what one gateway encodes the other decodes; anything else is dropped. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decodeHeartbeat,
  decodeRouteMessage,
  decodeSnapshot,
  encodeSnapshot,
  encodeState,
  routeRecord,
} from '../../src/sync/records.ts';

test('a batch of records round trips: the route’s keys from its first uncached block', () => {
  const keys = [11, 22, 33, 2 ** 52 + 1];
  const data = JSON.stringify({
    g: 'gw-a',
    m: 'llama',
    r: [routeRecord('q1', 'r0', 70, 32, 16, keys, 'sql'), ['f', 'q1'], ['d', 'q1']],
  });
  assert.deepEqual(decodeRouteMessage(data), {
    sender: 'gw-a',
    model: 'llama',
    routes: [
      {
        kind: 'route',
        route: {
          requestId: 'q1',
          replica: 'r0',
          promptTokens: 70,
          uncachedTokens: 38,
          blockSize: 16,
          blockKeys: [33, 2 ** 52 + 1],
          fromBlock: 2,
          lora: 'sql',
        },
      },
      { kind: 'prefill', requestId: 'q1' },
      { kind: 'done', requestId: 'q1' },
    ],
  });
});

test('state and snapshot messages round trip', () => {
  const entry = {
    peer: null,
    requestId: 'q',
    replica: 'r1',
    promptTokens: 100,
    uncachedTokens: 20,
    blockSize: 16,
    decoding: true,
  };
  assert.deepEqual(decodeRouteMessage(encodeState('gw-a', null, [entry])), {
    sender: 'gw-a',
    model: null,
    state: [{ ...entry, peer: 'gw-a' }],
  });
  const snap = {
    sender: 'gw-b',
    pools: [{ model: 'm', entries: [entry, { ...entry, peer: 'gw-c', decoding: false }] }],
  };
  assert.deepEqual(decodeSnapshot(encodeSnapshot(snap)), snap);
});

test('malformed messages are dropped whole', () => {
  const bad = [
    'not json',
    '[]',
    '{"g": "", "m": null, "r": []}',
    '{"g": "a", "m": 1, "r": []}',
    '{"g": "a", "m": null}',
    '{"g": "a", "m": null, "r": [["x", "q"]]}',
    '{"g": "a", "m": null, "r": [["r", "q", "r0", 10, 11, 16, 0, [], null]]}',
    '{"g": "a", "m": null, "r": [["r", "q", "r0", 10, 5, 0, 0, [], null]]}',
    '{"g": "a", "m": null, "r": [["r", "q", "r0", 10, 5, 16, 0, [1.5], null]]}',
    '{"g": "a", "m": null, "r": [["f", "q"], ["d"]]}',
    '{"g": "a", "m": null, "s": [["q", "r0", 10, 5, 16, 2, null]]}',
  ];
  for (const data of bad) assert.equal(decodeRouteMessage(data), null, data);
  assert.equal(decodeHeartbeat('{"g": 3}'), null);
  assert.deepEqual(decodeHeartbeat('{"g": "a", "bye": true}'), { sender: 'a', bye: true });
  assert.equal(
    decodeSnapshot('{"g": "a", "p": [{"m": null, "e": [[5, "q", "r", 1, 1, 16, 0, null]]}]}'),
    null,
  );
});
