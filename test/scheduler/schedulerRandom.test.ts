import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { KvPolicyName, SchedulerConfig } from '../../src/scheduler/types.ts';
import { Rng } from '../../src/util/rng.ts';
import { makeRequests, runSim, type SimSetup } from '../support/schedulerHarness.ts';

interface Params {
  seed: number;
  policy: KvPolicyName;
  budget: number;
  slots: number;
  blockSize: number;
  caching: boolean;
  /** 0: barely enough KV for the largest request; 1: generous. */
  kvSlack: number;
  requests: number;
  priorities: number;
  options: boolean;
  /** Adapters the requests use (0: none) and the engine's max_loras. */
  loras?: number;
  maxLoras?: number;
  /** Abort about a third of the requests, each at a random step after its arrival. */
  aborts?: boolean;
}

const blocksFor = (tokens: number, blockSize: number) => Math.ceil(tokens / blockSize);

function makeSetup(p: Params): SimSetup {
  const rng = new Rng(p.seed);
  const requests = makeRequests(rng, p.requests, {
    maxPrompt: 299,
    maxNew: 40,
    priorities: p.priorities,
    withTokens: p.caching,
    ...(p.loras && { loras: p.loras }),
  });
  if (p.aborts) {
    const r = new Rng(p.seed ^ 0xab0);
    for (const req of requests) {
      if (r.int(3) === 0) req.abortAtStep = req.arrivalStep + r.int(120);
    }
  }
  const largest = Math.max(
    ...requests.map((r) => blocksFor(r.promptTokens + r.maxNewTokens, p.blockSize)),
  );
  const watermark = p.policy === 'paged' ? 0.01 : 0;
  // Barely enough: the largest request plus the watermark; generous: room for most at once.
  let numBlocks = largest + Math.floor(p.kvSlack * p.kvSlack * largest * 6);
  while (numBlocks - Math.floor(watermark * numBlocks) < largest) numBlocks++;
  const sched: SchedulerConfig = {
    budgetTokens: p.budget,
    maxSeqs: p.slots,
    kvPolicy: p.policy,
    watermark,
    ...(p.maxLoras !== undefined && { maxLoras: p.maxLoras }),
  };
  if (p.options) {
    const r = new Rng(p.seed ^ 0x5eed);
    sched.longPrefillThreshold = r.int(2) === 0 ? 0 : r.range(1, 64);
    sched.maxPartialPrefills = r.range(1, 3);
    sched.priorityAgeMs = r.pick([0, 50, 1e9]);
    if (p.budget >= p.blockSize && (sched.longPrefillThreshold || Infinity) >= p.blockSize) {
      sched.alignChunksToBlocks = r.int(2) === 0;
    }
  }
  return { sched, blockSize: p.blockSize, numBlocks, caching: p.caching, requests };
}

const params = (policy: KvPolicyName, options: boolean) =>
  fc.record({
    seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    policy: fc.constant(policy),
    budget: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 256 })),
    slots: fc.integer({ min: 1, max: 11 }),
    blockSize: fc.constantFrom(1, 4, 16),
    caching: fc.boolean(),
    kvSlack: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true })),
    requests: fc.integer({ min: 1, max: 30 }),
    priorities: options ? fc.integer({ min: 1, max: 3 }) : fc.constant(1),
    options: fc.constant(options),
  });

let totals = { sims: 0, steps: 0, requests: 0, preemptions: 0, hits: 0 };

function check(p: Params): void {
  const setup = makeSetup(p);
  const result = runSim(setup);
  totals = {
    sims: totals.sims + 1,
    steps: totals.steps + result.steps,
    requests: totals.requests + setup.requests.length,
    preemptions: totals.preemptions + result.preemptions,
    hits: totals.hits + result.prefixHitsTokens,
  };
  // The same seed gives the same trace.
  if (p.seed % 8 === 0) assert.equal(runSim(makeSetup(p)).traceHash, result.traceHash);
}

test('reserve: 400 random simulations keep every invariant', () => {
  totals = { sims: 0, steps: 0, requests: 0, preemptions: 0, hits: 0 };
  fc.assert(fc.property(params('reserve', false), check), { numRuns: 400 });
  assert.equal(totals.preemptions, 0);
  assert.ok(totals.hits > 0, 'some prefix hits happened');
  console.log('reserve', totals);
});

test('paged: 400 random simulations, preemption storms included, keep every invariant', () => {
  totals = { sims: 0, steps: 0, requests: 0, preemptions: 0, hits: 0 };
  fc.assert(fc.property(params('paged', false), check), { numRuns: 400 });
  assert.ok(totals.preemptions > 100, `preemptions happened (${totals.preemptions})`);
  console.log('paged', totals);
});

test('options (priorities, caps, alignment): 200 random simulations per policy', () => {
  for (const policy of ['reserve', 'paged'] as const) {
    fc.assert(fc.property(params(policy, true), check), { numRuns: 200 });
  }
});

test('rotating decodes: 200 random simulations keep the other invariants', () => {
  fc.assert(
    fc.property(params('paged', false), (p) => {
      const setup = makeSetup(p);
      setup.sched.rotateDecodes = true;
      runSim(setup);
    }),
    { numRuns: 200 },
  );
});

test('aborts: 400 random simulations abort requests waiting, mid-prefill and decoding', () => {
  const seen = { waiting: 0, prefill: 0, decode: 0 };
  let preempted = 0;
  fc.assert(
    fc.property(
      fc.constantFrom<KvPolicyName>('reserve', 'paged'),
      fc.boolean(),
      params('paged', false),
      fc.integer({ min: 0, max: 3 }),
      (policy, options, base, loras) => {
        const p: Params = {
          ...base,
          policy,
          options,
          aborts: true,
          requests: base.requests + 5,
          ...(loras > 0 && { loras, maxLoras: Math.max(1, loras - 1) }),
        };
        const result = runSim(makeSetup(p));
        for (const k of ['waiting', 'prefill', 'decode'] as const) seen[k] += result.aborts[k];
        preempted += result.preemptions;
      },
    ),
    { numRuns: 400 },
  );
  // Every place an abort can find a request was exercised, many times over.
  assert.ok(seen.waiting > 50, `aborted while waiting: ${seen.waiting}`);
  assert.ok(seen.prefill > 20, `aborted part way through prefill: ${seen.prefill}`);
  assert.ok(seen.decode > 50, `aborted while decoding: ${seen.decode}`);
  assert.ok(preempted > 0, 'with preemptions among them');
  console.log('aborts', seen, { preempted });
});

test('LoRA: never more than max_loras distinct adapters among running requests (300 simulations)', () => {
  let held = 0;
  fc.assert(
    fc.property(
      fc.constantFrom<KvPolicyName>('reserve', 'paged'),
      fc.boolean(),
      params('paged', false),
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 1, max: 3 }),
      (policy, options, base, loras, maxLoras) => {
        const p = { ...base, policy, options, loras, maxLoras, requests: base.requests + 10 };
        const result = runSim(makeSetup(p));
        held += result.loraPassed;
      },
    ),
    { numRuns: 300 },
  );
  assert.ok(held > 100, `admissions passed a request held back for its adapter (${held} times)`);
});
