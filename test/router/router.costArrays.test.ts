/**
 * The `cost` policy scored from the router's arrays (CostPolicy.pickFromArrays, taken by the
 * router whenever a route needs nothing a view adds) against the same policy through views: two
 * routers with the same seed go through the same random history (routes with and without an
 * adapter or avoided replicas, first tokens, finishes, reports fresh, stale and over the KV
 * threshold, replicas down, up and removed, stored blocks), and every answer must be the same,
 * scores included. The second router's policy is a CostPolicy behind a plain object, which the
 * router can only ask through views.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { CostPolicy } from '../../src/router/policies/cost.ts';
import { type Policy, Router } from '../../src/router/index.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView, request, stored, tokens } from '../support/routing.ts';

type Op =
  | { op: 'route'; prefix: number; own: number; avoid: number; lora: boolean }
  | { op: 'first' | 'finish'; k: number }
  | { op: 'report'; r: number; kvUsage: number; waiting: number }
  | { op: 'down' | 'up' | 'remove'; r: number }
  | { op: 'store'; r: number; prefix: number }
  | { op: 'tick'; ms: number };

const replica = fc.integer({ min: 0, max: 69 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('route' as const),
      prefix: fc.integer({ min: 0, max: 4 }),
      own: fc.integer({ min: 0, max: 80 }),
      avoid: fc.integer({ min: -8, max: 69 }),
      lora: fc.boolean(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constantFrom('first', 'finish'), k: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('report' as const),
      r: replica,
      kvUsage: fc.double({ min: 0, max: 1, noNaN: true }),
      waiting: fc.nat({ max: 20 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom('down', 'up', 'remove'), r: replica }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('store' as const),
      r: replica,
      prefix: fc.integer({ min: 0, max: 4 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.nat({ max: 900 }) }),
  },
);

test('pickFromArrays scores, ties and draws as pick over the same candidates', () => {
  // Few distinct queues and matches, so that equal scores (with equal and with unequal queues)
  // are common: the tie rules are where the two could part.
  const candidate = fc.record({
    queued: fc.constantFrom(0, 16, 32, 48, 160),
    matched: fc.integer({ min: 0, max: 12 }),
  });
  fc.assert(
    fc.property(
      fc.array(candidate, { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 200 }),
      fc.integer({ min: 0, max: 1_000 }),
      (candidates, promptTokens, seed) => {
        // Candidate i is replica 2i + 1: ids that are not positions, with gaps between them.
        const ids = candidates.map((_, i) => 2 * i + 1);
        const queued = new Float64Array(2 * candidates.length + 2);
        const matched = new Int32Array(2 * candidates.length + 2);
        candidates.forEach((c, i) => {
          queued[ids[i]!] = c.queued;
          matched[ids[i]!] = c.matched;
        });
        const req = { id: 'q', blockKeys: [], promptTokens, blockSize: BLOCK };
        const views = candidates.map((c, i) =>
          replicaView(ids[i]!, {
            cachedBlocks: c.matched,
            queuedPromptTokens: c.queued,
          }),
        );
        // replicaView caches whole blocks; the router caps them at the prompt.
        const capped = views.map((v) => ({
          ...v,
          cachedTokens: Math.min(promptTokens, v.cachedTokens),
        }));
        const byViews = new Rng(seed);
        const byArrays = new Rng(seed);
        const policy = new CostPolicy();
        const a = policy.pick({
          request: req,
          nowMs: 0,
          candidates: capped,
          fleet: [],
          fleetVersion: 0,
          rng: byViews,
        });
        const aScores = [...(a.scores ?? [])];
        const b = policy.pickFromArrays(ids, ids.length, queued, matched, req, byArrays);
        assert.equal(b.replicaId, a.replicaId);
        assert.deepEqual([...(b.scores ?? [])], aScores);
        assert.equal(byArrays.next(), byViews.next(), 'the same draws were taken');
      },
    ),
    { numRuns: 400 },
  );
});

/** An answer or the error code, so that both routers can be compared call by call. */
function outcome(call: () => unknown): unknown {
  try {
    return { value: call() };
  } catch (err) {
    return { code: (err as { code?: string }).code ?? String(err) };
  }
}

test('cost from arrays picks as cost through views, draw for draw', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 70 }),
      fc.array(opArb, { minLength: 1, maxLength: 120 }),
      fc.integer({ min: 1, max: 1_000 }),
      (count, ops, seed) => {
        const names = Array.from({ length: count }, (_, i) => `r${i}`);
        const inner = new CostPolicy();
        const viaViews: Policy = { name: 'cost', loraAware: true, pick: (i) => inner.pick(i) };
        const routers = [
          new Router({ replicas: names, policy: 'cost', seed, explain: true }),
          new Router({ replicas: names, policy: viaViews, seed, explain: true }),
        ];
        const routed: string[] = [];
        let nowMs = 1_000;
        ops.forEach((o, step) => {
          if (o.op === 'tick') {
            nowMs += o.ms;
            return;
          }
          const name = names[('r' in o ? o.r : 0) % count]!;
          const prefixTokens = (p: number) => tokens(p, 160);
          const answers = routers.map((router) =>
            outcome(() => {
              switch (o.op) {
                case 'route': {
                  const toks = prefixTokens(o.prefix).concat(tokens(1_000 + step, o.own));
                  const req = request(`q${step}`, toks);
                  return router.route(
                    {
                      ...req,
                      ...(o.avoid >= 0 && { avoid: [names[o.avoid % count]!] }),
                      ...(o.lora && { lora: 'adapter-a' }),
                    },
                    nowMs,
                  );
                }
                case 'first':
                  return (
                    routed.length > 0 && router.onFirstToken(routed[o.k % routed.length]!, nowMs)
                  );
                case 'finish':
                  return (
                    routed.length > 0 && router.onFinished(routed[o.k % routed.length]!, nowMs)
                  );
                case 'report':
                  return router.onReport(
                    name,
                    { kvUsage: o.kvUsage, running: 1, waiting: o.waiting },
                    nowMs,
                  );
                case 'down':
                  return router.markDown(name);
                case 'up':
                  return router.markUp(name);
                case 'remove':
                  return router.removeReplica(name);
                case 'store':
                  return router.applyEvents(name, [stored(prefixTokens(o.prefix))], nowMs);
              }
            }),
          );
          assert.deepEqual(answers[0], answers[1], `step ${step}: ${JSON.stringify(o)}`);
          if (o.op === 'route') routed.push(`q${step}`);
        });
        assert.deepEqual(routers[0]!.counters(), routers[1]!.counters());
      },
    ),
    { numRuns: 150 },
  );
});
