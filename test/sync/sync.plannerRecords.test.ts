/**
 * The online planners' messages: what one instance encodes another decodes, its arrivals placed
 * on the receiver's clock; anything malformed or out of range is dropped whole.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { Observation } from '../../src/planner/online/window.ts';
import {
  decodePlannerMessage,
  encodePlannerMessage,
  MAX_SHARED_OBSERVATIONS,
} from '../../src/sync/plannerRecords.ts';

test('requests round trip, their arrivals as ages: the receiver places them on its own clock', () => {
  const sent: Observation[] = [
    { atMs: 1_000_000, promptTokens: 2_048, outputTokens: 128, chunkKeys: [7, 2 ** 52 + 1] },
    { atMs: 1_000_250, promptTokens: 100, outputTokens: 1, chunkKeys: [] },
  ];
  const data = encodePlannerMessage('gw-a', 'llama-3.3-70b', sent, 3, 1_001_000);
  // The receiver's clock is 5 s ahead of the sender's.
  const got = decodePlannerMessage(data, 1_006_000);
  assert.deepEqual(got, {
    sender: 'gw-a',
    pool: 'llama-3.3-70b',
    desired: 3,
    observations: [
      { atMs: 1_005_000, promptTokens: 2_048, outputTokens: 128, chunkKeys: [7, 2 ** 52 + 1] },
      { atMs: 1_005_250, promptTokens: 100, outputTokens: 1, chunkKeys: [] },
    ],
  });
  assert.equal(decodePlannerMessage(encodePlannerMessage('g', 'p', [], null, 0), 0)?.desired, null);
});

test('any request the planner keeps round trips (property)', () => {
  const observation = fc.record({
    ago: fc.integer({ min: 0, max: 3_600_000 }),
    promptTokens: fc.integer({ min: 1, max: 200_000 }),
    outputTokens: fc.integer({ min: 0, max: 100_000 }),
    keys: fc.array(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), { maxLength: 8 }),
  });
  fc.assert(
    fc.property(
      fc.array(observation, { maxLength: MAX_SHARED_OBSERVATIONS }),
      fc.option(fc.integer({ min: 0, max: 1_000 })),
      (list, desired) => {
        const nowMs = 10_000_000;
        const sent = list.map((o) => ({
          atMs: nowMs - o.ago,
          promptTokens: o.promptTokens,
          outputTokens: o.outputTokens,
          chunkKeys: o.keys.slice(0, Math.floor(o.promptTokens / 256)),
        }));
        const got = decodePlannerMessage(
          encodePlannerMessage('p1', 'm', sent, desired, nowMs),
          nowMs,
        );
        assert.deepEqual(got, { sender: 'p1', pool: 'm', observations: sent, desired });
      },
    ),
  );
});

test('a malformed or out-of-range message is dropped whole', () => {
  const ok = { g: 'gw-a', p: 'm', o: [[10, 1_024, 16, [1, 2]]], d: 2 };
  assert.ok(decodePlannerMessage(JSON.stringify(ok), 0));
  const bad: [string, unknown][] = [
    ['not JSON', '{'],
    ['an array', [ok]],
    ['a sender that is not one subject token', { ...ok, g: 'a.b' }],
    ['no pool', { ...ok, p: '' }],
    ['a pool name past 256 characters', { ...ok, p: 'x'.repeat(257) }],
    ['requests not a list', { ...ok, o: {} }],
    [
      'too many requests',
      { ...ok, o: Array.from({ length: MAX_SHARED_OBSERVATIONS + 1 }, () => ok.o[0]) },
    ],
    ['a negative age', { ...ok, o: [[-1, 1_024, 16, []]] }],
    ['an age past a day', { ...ok, o: [[86_400_001, 1_024, 16, []]] }],
    ['an empty prompt', { ...ok, o: [[0, 0, 16, []]] }],
    ['a prompt past 4 Mi tokens', { ...ok, o: [[0, 4_194_305, 16, []]] }],
    ['a fractional output', { ...ok, o: [[0, 1_024, 1.5, []]] }],
    ['more chunk keys than the prompt has', { ...ok, o: [[0, 511, 16, [1, 2]]] }],
    ['a key that is not a safe integer', { ...ok, o: [[0, 1_024, 16, [2 ** 53]]] }],
    ['a request of three fields', { ...ok, o: [[0, 1_024, 16]] }],
    ['a negative count', { ...ok, d: -1 }],
    ['a count past the bound', { ...ok, d: 65_537 }],
    ['a count that is not a number', { ...ok, d: '3' }],
  ];
  for (const [why, message] of bad) {
    const data = typeof message === 'string' ? message : JSON.stringify(message);
    assert.equal(decodePlannerMessage(data, 0), null, why);
  }
});
