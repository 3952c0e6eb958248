/** Prompt synthesis: text with the workload's token counts and sharing, for the builtin tokenizer. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type PromptRequest, promptStream } from '../../src/loadgen/prompts.ts';
import { builtinVocab } from '../../src/loadgen/words.ts';
import { buildWorkload, type WorkloadSpec } from '../../src/workload/spec.ts';
import { makeSyntheticTrace } from '../../src/workload/trace.ts';
import { makeWorkload } from '../../src/workload/workloads.ts';
import { getTokenizer } from '../../src/tokenizer/tokenizer.ts';

const tokenizer = getTokenizer();
/** The workload as the load generator builds it (block size shapes only the keys). */
const benchWorkload = (spec: WorkloadSpec, seed: number, durationMs: number | undefined) =>
  buildWorkload(spec, { seed, blockSize: 16, durationMs });
const take = (it: Iterable<PromptRequest>, n: number): PromptRequest[] => {
  const out: PromptRequest[] = [];
  for (const r of it) {
    out.push(r);
    if (out.length === n) break;
  }
  return out;
};

describe('word vocabulary', () => {
  test('every word is one token, alone and in a run', () => {
    const vocab = builtinVocab();
    assert.ok(vocab.size > 10_000, `only ${vocab.size} words`);
    const ids = Array.from({ length: 3000 }, (_, i) => (i * 7919) % vocab.size);
    const text = vocab.text(ids);
    assert.equal(tokenizer.encode(text).length, ids.length);
    assert.equal(tokenizer.encode(vocab.word(123)).length, 1);
  });

  test('a prefix keeps its tokens when a suffix follows', () => {
    const vocab = builtinVocab();
    const prefix = vocab.text(Array.from({ length: 500 }, (_, i) => i * 31));
    const suffix = vocab.text(Array.from({ length: 100 }, (_, i) => i * 17 + 5));
    const alone = tokenizer.encode(prefix);
    const joined = tokenizer.encode(prefix + suffix);
    assert.equal(alone.length, 500);
    assert.deepEqual(joined.slice(0, 500), alone);
    assert.equal(joined.length, 600);
  });
});

describe('workload prompts', () => {
  test('same arrivals and lengths as the simulator for the same seed', () => {
    const sim = makeWorkload('groups', { seed: 3, durationMs: 5_000, blockSize: 16 });
    const bench = benchWorkload({ kind: 'synthetic', name: 'groups' }, 3, 5_000);
    const a = [...iterate(sim.arrivals())];
    const b = [...iterate(bench.arrivals())];
    assert.ok(a.length > 50);
    assert.deepEqual(b, a);
  });

  test('prompt text tokenizes to the workload length; customers share exactly their prefix', () => {
    const w = benchWorkload({ kind: 'synthetic', name: 'groups', ratePerS: 40 }, 1, 20_000);
    const reqs = take(promptStream(w), 60);
    const byCustomer = new Map<number, number[][]>();
    for (const r of reqs) {
      const ids = tokenizer.encode(r.text);
      assert.equal(ids.length, r.arrival.promptLength);
      byCustomer.set(r.arrival.customer, [...(byCustomer.get(r.arrival.customer) ?? []), ids]);
    }
    const pair = [...byCustomer.values()].find((v) => v.length >= 2);
    assert.ok(pair, 'some group sent twice');
    const [x, y] = pair as [number[], number[]];
    assert.deepEqual(x.slice(0, 2048), y.slice(0, 2048));
    assert.notDeepEqual(x.slice(2048, 2064), y.slice(2048, 2064));
    const others = [...byCustomer.values()].filter((v) => v !== pair);
    assert.notDeepEqual(others[0]![0]!.slice(0, 16), x.slice(0, 16));
  });

  test('a multi-turn conversation extends its previous prompt', () => {
    const w = benchWorkload({ kind: 'synthetic', name: 'multiturn', ratePerS: 20 }, 1, 60_000);
    const reqs = take(promptStream(w), 200);
    const first = reqs.find((r) =>
      reqs.some((s) => s.arrival.customer === r.arrival.customer && s !== r),
    )!;
    const later = reqs.find((s) => s.arrival.customer === first.arrival.customer && s !== first)!;
    assert.ok(later.text.startsWith(first.text));
  });

  test('trace: text per 512-token hash id, equal ids give equal text', () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-trace-'));
    try {
      const path = join(dir, 'trace.jsonl');
      writeFileSync(
        path,
        makeSyntheticTrace({
          seed: 2,
          requests: 20,
          ratePerS: 5,
          roots: 2,
          sharedBlocks: 2,
          maxUniqueBlocks: 2,
          outputTokens: 8,
        }),
      );
      const w = benchWorkload({ kind: 'trace', path, rateScale: 1 }, 1, undefined);
      const reqs = take(promptStream(w), 20);
      assert.equal(reqs.length, 20);
      for (const r of reqs) assert.equal(tokenizer.encode(r.text).length, r.arrival.promptLength);
      const root = (r: PromptRequest) => r.arrival.hashIds![0];
      const [a, b] = reqs.filter((r) => root(r) === root(reqs[0]!));
      assert.ok(a && b, 'two requests on one root');
      const words = (t: string) => t.split(' ').slice(1, 1 + 1024);
      assert.deepEqual(words(a.text), words(b.text));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function* iterate<T>(it: Iterator<T>): Generator<T> {
  for (let n = it.next(); !n.done; n = it.next()) yield n.value;
}
