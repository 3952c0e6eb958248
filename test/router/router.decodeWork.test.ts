/**
 * delay-cost's decode term: a replica's running decodes counted as queue in prompt tokens
 * (decodeWork.ts), off by default, and the delay-cost decision it changes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { readFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { Router } from '../../src/router/index.ts';
import type { PickInput, ReplicaView } from '../../src/router/index.ts';
import { DelayCostPolicy } from '../../src/router/policies/delayCost.ts';
import { decodeQueueTokens } from '../../src/router/policies/decodeWork.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView } from '../support/routing.ts';

const PROMPT = 1_280;
const CACHED = 1_024;

const input = (candidates: ReplicaView[]): PickInput => ({
  request: { id: 'q', blockKeys: [], promptTokens: PROMPT, blockSize: BLOCK },
  nowMs: 0,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

const view = (id: number, o: { queued?: number; decode?: number; cached?: number }) =>
  replicaView(id, {
    queuedPromptTokens: o.queued ?? 0,
    prefillRequests: (o.queued ?? 0) > 0 ? 1 : 0,
    decodeRequests: o.decode ?? 0,
    inFlight: ((o.queued ?? 0) > 0 ? 1 : 0) + (o.decode ?? 0),
    cachedBlocks: (o.cached ?? 0) / BLOCK,
  });

test('decodeQueueTokens: decodes x cost per step the request waits through, at least one step', () => {
  const w = { decodes: 2, aheadTokens: 1_020, decodeCostTokens: 25, budgetTokens: 512 };
  // 1,020 tokens ahead at 510 prefill tokens per step: 2 steps, each 2 x 25 tokens longer.
  assert.equal(decodeQueueTokens(w), 100);
  assert.equal(decodeQueueTokens({ ...w, aheadTokens: 0 }), 50, 'the step in flight');
  assert.equal(decodeQueueTokens({ ...w, decodes: 0 }), 0);
  assert.equal(decodeQueueTokens({ ...w, decodeCostTokens: 0 }), 0, 'a GPU: decodes ride free');
  assert.equal(decodeQueueTokens({ ...w, decodeCostTokens: Number.NaN }), 0);
});

test('decodeQueueTokens: grows with decodes, cost and the prefill ahead; never below 0', () => {
  const arb = fc.record({
    decodes: fc.integer({ min: 0, max: 64 }),
    aheadTokens: fc.integer({ min: 0, max: 100_000 }),
    decodeCostTokens: fc.double({ min: 0, max: 200, noNaN: true }),
    budgetTokens: fc.integer({ min: 1, max: 8_192 }),
  });
  fc.assert(
    fc.property(arb, (w) => {
      const x = decodeQueueTokens(w);
      assert.ok(x >= 0 && Number.isFinite(x));
      assert.ok(decodeQueueTokens({ ...w, decodes: w.decodes + 1 }) >= x);
      assert.ok(decodeQueueTokens({ ...w, aheadTokens: w.aheadTokens + 100 }) >= x);
      assert.ok(decodeQueueTokens({ ...w, decodeCostTokens: w.decodeCostTokens + 1 }) >= x);
    }),
  );
});

test('delay-cost: without a decode cost a replica busy decoding looks idle; with one it is not', () => {
  // Replica 0 owns the prefix and runs 3 decodes; replica 1 is idle and cold.
  const candidates = [view(0, { decode: 3, cached: CACHED }), view(1, {})];
  const blind = new DelayCostPolicy({ prefillUsPerToken: 200 });
  assert.equal(blind.pick(input(candidates)).replicaId, 0, 'uncached 256 against 1,280');
  // On a CPU engine a decode token costs 400 prompt tokens here: the owner's 3 decodes add
  // 1,200 tokens a step, more than the 1,024 its cache saves.
  const aware = new DelayCostPolicy({
    prefillUsPerToken: 200,
    decodeCostTokens: 400,
    budgetTokens: 512,
  });
  const scores = aware.pick(input(candidates)).scores!;
  assert.equal(aware.pick(input(candidates)).replicaId, 1);
  assert.ok(Math.abs(scores[0]! - (256 + 1_200) * 0.2) < 1e-9, `owner scores ${scores[0]}`);
  assert.ok(Math.abs(scores[1]! - 1_280 * 0.2) < 1e-9, `idle replica scores ${scores[1]}`);
  // A cheap decode (25 tokens) leaves the owner its request.
  const cheap = new DelayCostPolicy({
    prefillUsPerToken: 200,
    decodeCostTokens: 25,
    budgetTokens: 512,
  });
  assert.equal(cheap.pick(input(candidates)).replicaId, 0);
});

test('delay-cost: the decode term leaves decisions unchanged on a fleet with no decodes running', () => {
  const arb = fc.array(
    fc.record({
      queued: fc.integer({ min: 0, max: 5_000 }),
      cached: fc.integer({ min: 0, max: PROMPT / BLOCK }).map((b) => b * BLOCK),
    }),
    { minLength: 1, maxLength: 6 },
  );
  fc.assert(
    fc.property(arb, (rs) => {
      const candidates = rs.map((r, id) => view(id, r));
      const a = new DelayCostPolicy({ prefillUsPerToken: 100 }).pick(input(candidates));
      const b = new DelayCostPolicy({
        prefillUsPerToken: 100,
        decodeCostTokens: 50,
        budgetTokens: 256,
      }).pick(input(candidates));
      assert.deepEqual(b, a);
    }),
  );
});

const serveFlags = (argv: string[]) => {
  const flags = readFlags(argv, {
    'decode-cost-tokens': { type: 'string' as const },
    'engine-budget': { type: 'string' as const },
  });
  if (flags === 'help') throw new Error('unexpected help');
  return flags;
};

test('kvroute serve --decode-cost-tokens C --engine-budget N, and the config keys', () => {
  assert.equal(readServeConfig(serveFlags([])).decodeCost, undefined, 'off by default');
  assert.deepEqual(
    readServeConfig(serveFlags(['--decode-cost-tokens', '37.5', '--engine-budget', '512']))
      .decodeCost,
    { tokens: 37.5, budgetTokens: 512 },
  );
  assert.deepEqual(readServeConfig(serveFlags(['--decode-cost-tokens', '20'])).decodeCost, {
    tokens: 20,
  });
  assert.throws(
    () => readServeConfig(serveFlags(['--engine-budget', '512'])),
    /--engine-budget needs --decode-cost-tokens/,
  );
  assert.throws(
    () => readServeConfig(serveFlags(['--decode-cost-tokens', '-1'])),
    /--decode-cost-tokens/,
  );
  const cfg = applyConfigDoc({ 'decode-cost-tokens': 30, 'engine-budget': 256 }, defaultConfig());
  assert.deepEqual(cfg.decodeCost, { tokens: 30, budgetTokens: 256 });
  assert.throws(
    () => applyConfigDoc({ 'decode-cost-tokens': 'x' }, defaultConfig()),
    /decode-cost-tokens/,
  );
});

test('the router hands the decode cost to delay-cost', () => {
  const router = new Router({
    replicas: ['a', 'b'],
    policy: 'delay-cost',
    policyOptions: { decodeCostTokens: 30, budgetTokens: 256 },
  });
  const policy = router.policy as DelayCostPolicy;
  assert.equal(policy.decodeCostTokens, 30);
  assert.equal(policy.budgetTokens, 256);
});
