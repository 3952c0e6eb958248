import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { makeSyntheticTrace, TRACE_BLOCK_TOKENS, TraceWorkload } from '../../src/workload/trace.ts';
import { type Arrival, makeWorkload, WORKLOAD_NAMES } from '../../src/workload/workloads.ts';
import type { Workload } from '../../src/workload/types.ts';

function take(w: Workload, n = Number.POSITIVE_INFINITY): Arrival[] {
  const out: Arrival[] = [];
  const it = w.arrivals();
  for (let a = it.next(); !a.done && out.length < n; a = it.next()) out.push(a.value);
  return out;
}

test('every workload is deterministic per seed, time-ordered and keys match its tokens', () => {
  for (const name of WORKLOAD_NAMES) {
    const opts = { seed: 7, durationMs: 20_000, blockSize: 16 };
    const a = makeWorkload(name, opts);
    const b = makeWorkload(name, opts);
    const xs = take(a);
    assert.deepEqual(xs, take(b), name);
    assert.notDeepEqual(xs, take(makeWorkload(name, { ...opts, seed: 8 })), name);
    assert.ok(xs.length > 50, `${name}: ${xs.length} arrivals`);
    for (let i = 1; i < xs.length; i++) assert.ok(xs[i]!.atMs >= xs[i - 1]!.atMs, name);
    assert.ok(xs.every((x) => x.atMs < 20_000));
    // Cached prefix keys extended per request equal keys computed from scratch.
    for (const x of xs.slice(0, 12)) {
      const m = a.materialize(x);
      assert.equal(m.tokens.length, x.promptLength);
      const scope = x.lora === undefined ? undefined : { loraName: x.lora };
      assert.deepEqual(m.blockKeys, computeBlockKeys(m.tokens, 16, scope), name);
      assert.deepEqual(b.materialize(x), m, `${name}: materializing is deterministic`);
    }
  }
});

test('seed workload: 40 req/s, 200 customers sharing 6,000-token prefixes', () => {
  const w = makeWorkload('seed', { seed: 1, durationMs: 100_000, blockSize: 16 });
  const xs = take(w);
  assert.ok(Math.abs(xs.length / 100 - 40) < 2, `${xs.length / 100} req/s`);
  assert.ok(xs.every((x) => x.promptLength === 8000 && x.outputTokens === 300));
  const customers = new Set(xs.map((x) => x.customer));
  assert.equal(customers.size, 200);
  const same = xs.filter((x) => x.customer === xs[0]!.customer).slice(0, 2);
  const [p, q] = same.map((x) => w.materialize(x));
  assert.deepEqual(p!.tokens.slice(0, 6000), q!.tokens.slice(0, 6000));
  assert.notDeepEqual(p!.tokens.slice(6000), q!.tokens.slice(6000));
  assert.deepEqual(p!.blockKeys.slice(0, 375), q!.blockKeys.slice(0, 375));
  assert.notEqual(p!.blockKeys[375], q!.blockKeys[375]);
  assert.equal(w.prefixWatchKey(xs[0]!.customer), p!.blockKeys[374]);
  // --rate scales the arrival rate.
  const slow = take(
    makeWorkload('seed', { seed: 1, durationMs: 100_000, blockSize: 16, ratePerS: 4 }),
  );
  assert.ok(Math.abs(slow.length / 100 - 4) < 0.7);
});

test('hot sends 10 % to customer 0; low-shared shares 15 % of the prompt', () => {
  const hot = take(makeWorkload('hot', { seed: 1, durationMs: 100_000, blockSize: 16 }));
  const share = hot.filter((x) => x.customer === 0).length / hot.length;
  assert.ok(Math.abs(share - 0.1) < 0.015, `hot share ${share}`);
  const low = makeWorkload('low-shared', { seed: 1, durationMs: 5_000, blockSize: 16 });
  const ys = take(low);
  // The first customer seen twice (200 customers, about 200 requests in 5 s).
  const twice = ys.find((x, i) => ys.findIndex((y) => y.customer === x.customer) < i);
  assert.ok(twice, 'some customer sends two requests in 5 s');
  const same = ys.filter((x) => x.customer === twice.customer);
  assert.ok(same.length >= 2, `${same.length} requests of customer ${twice.customer}`);
  const [p, q] = same.slice(0, 2).map((x) => low.materialize(x));
  assert.deepEqual(p!.tokens.slice(0, 1200), q!.tokens.slice(0, 1200));
  assert.notDeepEqual(p!.tokens.slice(1200, 1216), q!.tokens.slice(1200, 1216));
});

test('multiturn: each turn of a conversation extends the previous prompt', () => {
  const w = makeWorkload('multiturn', { seed: 3, durationMs: 120_000, blockSize: 16 });
  const xs = take(w);
  const byConversation = new Map<number, Arrival[]>();
  for (const x of xs)
    byConversation.set(x.customer, [...(byConversation.get(x.customer) ?? []), x]);
  const long = [...byConversation.values()].find((turns) => turns.length >= 3)!;
  assert.ok(long, 'some conversation has 3 turns');
  const prompts = long.map((x) => w.materialize(x).tokens);
  for (let t = 1; t < prompts.length; t++) {
    assert.ok(prompts[t]!.length > prompts[t - 1]!.length);
    assert.deepEqual(prompts[t]!.slice(0, prompts[t - 1]!.length), prompts[t - 1]);
  }
});

test('groups: 64 groups x 16 prompts per shuffled round', () => {
  const xs = take(makeWorkload('groups', { seed: 1, durationMs: 60_000, blockSize: 16 }), 1024);
  const counts = new Map<number, number>();
  for (const x of xs) counts.set(x.customer, (counts.get(x.customer) ?? 0) + 1);
  assert.equal(counts.size, 64);
  assert.ok([...counts.values()].every((c) => c === 16));
  assert.ok(xs.every((x) => x.promptLength === 2048 + 128 && x.outputTokens === 256));
});

/** The Mooncake trace shipped in the repository (data/mooncake/README.md). */
const MOONCAKE_TRACE = join(import.meta.dirname, '../../data/mooncake/synthetic_trace.jsonl');

test('Mooncake traces: equal hash ids give equal tokens and keys; --rate-scale speeds up', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-sim-'));
  try {
    for (const path of [MOONCAKE_TRACE, join(dir, 'small.jsonl')]) {
      if (!existsSync(path)) {
        writeFileSync(
          path,
          makeSyntheticTrace({
            seed: 2,
            requests: 200,
            ratePerS: 4,
            roots: 10,
            sharedBlocks: 4,
            maxUniqueBlocks: 6,
            outputTokens: 100,
          }),
        );
      }
      const w = new TraceWorkload({ path, seed: 1, blockSize: 16, rateScale: 1 });
      const xs = take(w, 400);
      assert.ok(xs.length > 100);
      const fast = take(new TraceWorkload({ path, seed: 1, blockSize: 16, rateScale: 2 }), 400);
      assert.equal(fast.at(-1)!.atMs * 2, xs.at(-1)!.atMs);
      // Find two records sharing their first hash id and check the shared tokens and keys.
      const byFirst = new Map<number, Arrival>();
      let checked = 0;
      for (const x of xs) {
        const m = w.materialize(x);
        assert.equal(m.tokens.length, x.promptLength);
        assert.deepEqual(m.blockKeys, computeBlockKeys(m.tokens, 16));
        const prev = byFirst.get(x.hashIds![0]!);
        if (
          prev &&
          prev.promptLength >= TRACE_BLOCK_TOKENS &&
          x.promptLength >= TRACE_BLOCK_TOKENS
        ) {
          const pm = w.materialize(prev);
          assert.deepEqual(pm.tokens.slice(0, 512), m.tokens.slice(0, 512));
          assert.deepEqual(pm.blockKeys.slice(0, 32), m.blockKeys.slice(0, 32));
          checked++;
        }
        byFirst.set(x.hashIds![0]!, x);
        if (checked >= 5) break;
      }
      assert.ok(checked >= 1, 'some records share a first block');
    }
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"timestamp": 0}\n');
    assert.throws(
      () => take(new TraceWorkload({ path: bad, seed: 1, blockSize: 16, rateScale: 1 })),
      /bad\.jsonl:1: expected/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('lora: customers spread over K adapters, adapters drawn by a Zipf law, keys under the adapter', () => {
  const w = makeWorkload('lora', { seed: 3, durationMs: 200_000, blockSize: 16, adapters: 4 });
  assert.equal(w.adapters, 4);
  const xs = take(w);
  assert.ok(Math.abs(xs.length / 200 - 40) < 2, `${xs.length / 200} req/s`);
  const share = (k: number) => xs.filter((x) => x.lora === `lora-${k}`).length / xs.length;
  // Zipf s = 1 over 4: 1/H(4) = 0.48, then 0.24, 0.16, 0.12.
  for (const [k, expected] of [0.48, 0.24, 0.16, 0.12].entries()) {
    assert.ok(Math.abs(share(k) - expected) < 0.02, `lora-${k}: ${share(k)}`);
  }
  assert.ok(
    xs.every((x) => x.lora === `lora-${x.customer % 4}`),
    'customer c uses c mod K',
  );
  const x = xs[0]!;
  const m = w.materialize(x);
  assert.deepEqual(m.blockKeys, computeBlockKeys(m.tokens, 16, { loraName: x.lora }));
  assert.notDeepEqual(m.blockKeys.slice(0, 1), computeBlockKeys(m.tokens, 16).slice(0, 1));
  assert.equal(w.prefixWatchKey(x.customer), m.blockKeys[374]);
  const uniform = take(
    makeWorkload('lora', { seed: 3, durationMs: 50_000, blockSize: 16, adapters: 4, zipfS: 0 }),
  );
  const top = uniform.filter((u) => u.lora === 'lora-0').length / uniform.length;
  assert.ok(Math.abs(top - 0.25) < 0.03, `uniform: ${top}`);
  assert.throws(
    () => makeWorkload('lora', { seed: 1, durationMs: 1, blockSize: 16, adapters: 0 }),
    { name: 'RangeError', message: /^adapters must be an integer in 1\.\.\d+, got 0$/ },
  );
});
