/**
 * The `chat` workload (src/workload/chat.ts): ShareGPT-like lengths on average over many
 * conversations (the cited means), turns per conversation near 3.51, and every turn's prompt
 * the whole history so far (it extends the previous turn's prompt and answer).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SHAREGPT_LENGTHS } from '../../src/workload/chat.ts';
import { type Arrival, makeWorkload } from '../../src/workload/workloads.ts';

function arrivals(seed: number, durationMs: number): Arrival[] {
  const out: Arrival[] = [];
  const it = makeWorkload('chat', { seed, durationMs, blockSize: 16, ratePerS: 50 }).arrivals();
  for (let a = it.next(); !a.done; a = it.next()) out.push(a.value);
  return out;
}

const xs = arrivals(4, 600_000);
const byConversation = new Map<number, Arrival[]>();
for (const a of xs) {
  const list = byConversation.get(a.customer) ?? [];
  list.push(a);
  byConversation.set(a.customer, list);
}

test('arrivals are time-ordered, deterministic per seed', () => {
  for (let i = 1; i < xs.length; i++) assert.ok(xs[i]!.atMs >= xs[i - 1]!.atMs);
  assert.deepEqual(arrivals(4, 60_000), arrivals(4, 60_000));
  assert.notDeepEqual(arrivals(4, 60_000), arrivals(5, 60_000));
});

test('a turn’s prompt is the history: the previous prompt, its answer, a new message', () => {
  for (const turns of byConversation.values()) {
    for (let k = 1; k < turns.length; k++) {
      const prev = turns[k - 1]!;
      assert.ok(turns[k]!.promptLength > prev.promptLength + prev.outputTokens);
      assert.equal(turns[k]!.seed, prev.seed);
    }
  }
});

test('lengths and turns near ShareGPT’s published means', () => {
  // Conversations that started in the first half had time to finish their turns.
  const whole = [...byConversation.values()].filter((t) => t[0]!.atMs < 300_000);
  assert.ok(whole.length > 2000, `${whole.length} conversations`);
  const meanTurns = whole.reduce((n, t) => n + t.length, 0) / whole.length;
  assert.ok(Math.abs(meanTurns - SHAREGPT_LENGTHS.meanTurns) < 0.25, `turns ${meanTurns}`);
  const firsts = whole.map((t) => t[0]!);
  const meanUser = firsts.reduce((n, a) => n + a.promptLength, 0) / firsts.length;
  const answers = whole.flat();
  const meanOut = answers.reduce((n, a) => n + a.outputTokens, 0) / answers.length;
  // Log-normal draws, capped: the means within 10 % of the cited ones.
  assert.ok(Math.abs(meanUser / SHAREGPT_LENGTHS.meanUserTokens - 1) < 0.1, `user ${meanUser}`);
  assert.ok(Math.abs(meanOut / SHAREGPT_LENGTHS.meanOutputTokens - 1) < 0.1, `output ${meanOut}`);
});
