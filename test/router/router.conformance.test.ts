/** One suite, every policy: guarantees any routing policy must keep behind the Router. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { makePolicy, POLICY_NAMES, Router, RouterError } from '../../src/router/index.ts';
import { BLOCK, request, tokens as tokenStream } from '../support/routing.ts';

const tokens = (seed: number, count: number): number[] => tokenStream(seed, count, 0, 50000);

const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `r${i}`);

/**
 * The spread each policy promises for 300 distinct prompts on 100 idle replicas that never
 * finish anything (no cache hits, so only the load term or the hash decides):
 * - `least-load`: every request adds load, so the first 100 go to 100 different replicas;
 * - `hash`: a hash or a random draw (or all-equal scores broken at random): balls into bins,
 *   100 x (1 - 0.99^300) = 95.1 replicas expected, standard deviation about 2; at least 85;
 * - `bounded`: a load bound, at most 4 requests per replica, and at least the hash's 85.
 *   (KubeAI's CHWBL is held to `hash`: its bound, in-flight + 1 <= 1.25 x (total + 1) / n,
 *   passes no endpoint while the total is under n / 1.25 - 1, and then the key's owner takes
 *   the request, so at low load it is the ring alone.)
 * A policy not listed here is held to the weakest of them.
 *
 * A peer policy that brings its project's filters (Policy.ownFilters) is offered every replica
 * that is up: kvroute's KV and staleness guards apply only to the others.
 */
const SPREAD: Record<string, 'least-load' | 'hash' | 'bounded'> = {
  cost: 'least-load',
  'delay-cost': 'least-load',
  'round-robin': 'least-load',
  'least-queued': 'least-load',
  sglang: 'least-load',
  dynamo: 'least-load',
  aibrix: 'least-load',
  random: 'hash',
  'consistent-hash': 'hash',
  llmd: 'hash',
  'llmd-precise': 'hash',
  chwbl: 'hash',
  'least-load': 'least-load',
};

for (const policy of POLICY_NAMES) {
  /** kvroute's guards apply to this policy (false: a peer with its own filters). */
  const guarded = !makePolicy(policy).ownFilters;
  describe(`policy conformance: ${policy}`, () => {
    test('always picks a healthy, eligible replica when one exists', () => {
      fc.assert(
        fc.property(
          fc.array(
            fc.record({
              healthy: fc.boolean(),
              kvUsage: fc.double({ min: 0, max: 1, noNaN: true }),
              ageMs: fc.integer({ min: 0, max: 2_000 }),
              waiting: fc.integer({ min: 0, max: 50 }),
            }),
            { minLength: 1, maxLength: 12 },
          ),
          fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 8 }),
          (replicas, prefixes) => {
            const router = new Router({ replicas: names(replicas.length), policy, seed: 7 });
            const nowMs = 10_000;
            replicas.forEach((r, i) => {
              router.onReport(
                `r${i}`,
                { kvUsage: r.kvUsage, running: 1, waiting: r.waiting },
                nowMs - r.ageMs,
              );
              if (!r.healthy) router.markDown(`r${i}`);
            });
            const eligible = replicas
              .map((r, i) => ({ ...r, name: `r${i}` }))
              .filter((r) => r.healthy && (!guarded || (r.kvUsage <= 0.95 && r.ageMs <= 500)));
            prefixes.forEach((p, k) => {
              const req = request(`q${k}`, tokens(p, 64 + 16 * k));
              if (!replicas.some((r) => r.healthy)) {
                assert.throws(() => router.route(req, nowMs), { code: 'ERR_NO_HEALTHY_REPLICA' });
                return;
              }
              const d = router.route(req, nowMs);
              if (eligible.length > 0) {
                assert.ok(
                  eligible.some((e) => e.name === d.replica),
                  `${d.replica} not eligible`,
                );
                assert.equal(d.failedOpen, false);
              } else {
                assert.equal(d.failedOpen, true);
                assert.ok(replicas[d.replicaId]!.healthy);
              }
            });
          },
        ),
        { numRuns: 60 },
      );
    });

    test('picks an eligible replica as replicas fall and recover between routes', () => {
      // The router reuses its per-route lists: one route's longer list must not leak into the next.
      fc.assert(
        fc.property(
          fc.integer({ min: 1, max: 10 }),
          fc.array(
            fc.array(
              fc.record({
                up: fc.boolean(),
                kvUsage: fc.constantFrom(0.1, 0.99),
                ageMs: fc.constantFrom(0, 2_000),
              }),
              { minLength: 10, maxLength: 10 },
            ),
            { minLength: 1, maxLength: 12 },
          ),
          (count, rounds) => {
            const router = new Router({ replicas: names(count), policy, seed: 3 });
            rounds.forEach((states, k) => {
              const nowMs = 10_000 * (k + 1);
              const fleet = states.slice(0, count);
              fleet.forEach((r, i) => {
                router.onReport(
                  `r${i}`,
                  { kvUsage: r.kvUsage, running: 1, waiting: 0 },
                  nowMs - r.ageMs,
                );
                if (r.up) router.markUp(`r${i}`);
                else router.markDown(`r${i}`);
              });
              const req = request(`q${k}`, tokens(k % 3, 64));
              if (!fleet.some((r) => r.up)) {
                assert.throws(() => router.route(req, nowMs), { code: 'ERR_NO_HEALTHY_REPLICA' });
                return;
              }
              const d = router.route(req, nowMs);
              const chosen = fleet[d.replicaId]!;
              assert.ok(chosen.up, `round ${k}: ${d.replica} is down`);
              const passes = (r: { kvUsage: number; ageMs: number }) =>
                !guarded || (r.kvUsage < 0.95 && r.ageMs === 0);
              const eligible = fleet.some((r) => r.up && passes(r));
              assert.equal(d.failedOpen, !eligible, `round ${k}`);
              if (eligible) assert.ok(passes(chosen), `round ${k}`);
            });
          },
        ),
        { numRuns: 60 },
      );
    });

    test('deterministic for a seed', () => {
      const run = (): string[] => {
        const router = new Router({ replicas: names(8), policy, seed: 42 });
        const picks: string[] = [];
        for (let i = 0; i < 60; i++) {
          const d = router.route(request(`q${i}`, tokens(i % 5, 200 + (i % 7) * 16)), i);
          picks.push(d.replica);
          if (i % 3 === 0) router.onFirstToken(`q${i - 1}`, i);
        }
        return picks;
      };
      assert.deepEqual(run(), run());
    });

    test('fails open to the least loaded healthy replica when every one is filtered', () => {
      const router = new Router({ replicas: names(3), policy, seed: 1 });
      router.route(request('busy', tokens(1, 800)), 0);
      router.onReport('r0', { kvUsage: 0.99, running: 9, waiting: 9 }, 0);
      router.onReport('r1', { kvUsage: 0.99, running: 9, waiting: 9 }, 0);
      router.onReport('r2', { kvUsage: 0.99, running: 9, waiting: 9 }, 0);
      const busy = router.snapshot().replicas.find((r) => r.queuedPromptTokens > 0)!.name;
      const d = router.route(request('x', tokens(2, 160)), 10);
      if (!guarded) {
        // A peer's project filters none of them: the policy itself picks.
        assert.equal(d.failedOpen, false);
        assert.equal(router.counters().failOpens, 0);
        return;
      }
      assert.equal(d.failedOpen, true);
      assert.notEqual(d.replica, busy);
      assert.equal(router.counters().failOpens, 1);
    });

    test('only no healthy replica at all is an error, with a stable code', () => {
      const router = new Router({ replicas: names(2), policy });
      router.markDown('r0');
      router.markDown('r1');
      const err = (() => {
        try {
          router.route(request('x', tokens(1, 64)), 0);
        } catch (e) {
          return e;
        }
      })();
      assert.ok(err instanceof RouterError);
      assert.equal(err.code, 'ERR_NO_HEALTHY_REPLICA');
      assert.equal(router.counters().noHealthyReplica, 1);
      router.markUp('r1');
      assert.equal(router.route(request('y', tokens(1, 64)), 0).replica, 'r1');
    });

    test('handles one replica and a hundred', () => {
      const one = new Router({ replicas: ['solo'], policy });
      for (let i = 0; i < 5; i++)
        assert.equal(one.route(request(`a${i}`, tokens(i, 100)), i).replica, 'solo');
      const many = new Router({ replicas: names(100), policy, seed: 3 });
      const seen = new Map<string, number>();
      let firstHundred = 0;
      for (let i = 0; i < 300; i++) {
        const d = many.route(request(`b${i}`, tokens(i, 64 + (i % 10) * 16)), i);
        assert.ok(d.replicaId >= 0 && d.replicaId < 100);
        seen.set(d.replica, (seen.get(d.replica) ?? 0) + 1);
        if (i === 99) firstHundred = seen.size;
      }
      const spread = SPREAD[policy] ?? 'bounded';
      if (spread === 'least-load') {
        assert.equal(firstHundred, 100, 'the first 100 requests on 100 replicas');
        assert.equal(seen.size, 100);
        if (policy === 'round-robin') assert.ok([...seen.values()].every((n) => n === 3));
      } else {
        assert.ok(seen.size >= 85, `${seen.size} replicas of 100 for 300 requests`);
      }
      if (spread === 'bounded') assert.ok(Math.max(...seen.values()) <= 4, 'the load bound');
      many.markDown('r99');
      for (let i = 0; i < 50; i++) {
        assert.notEqual(many.route(request(`c${i}`, tokens(i, 100)), 400 + i).replica, 'r99');
      }
    });

    test('never throws on empty caches or prompts shorter than a block', () => {
      for (const mode of ['events', 'approx'] as const) {
        const router = new Router({ replicas: names(4), policy, indexMode: mode });
        const d = router.route({ id: 'e', blockKeys: [], promptTokens: 5, blockSize: BLOCK }, 0);
        assert.equal(d.cachedTokens, 0);
        assert.equal(d.uncachedTokens, 5);
        assert.equal(d.spilled, false);
        router.route(request('f', tokens(9, 333)), 1);
        assert.ok(router.onFirstToken('f', 2));
        assert.ok(router.onFinished('f', 3));
        assert.ok(router.onFinished('e', 3));
        assert.equal(router.onFinished('nope', 3), false);
      }
    });
  });
}
