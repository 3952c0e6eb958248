/**
 * The peer policies as their projects configure them: each one's filters and default
 * parameters, held to the upstream file they come from.
 * - llm-d: llm-d/llm-d-inference-scheduler, deploy/config/epp-precise-prefix-cache-config.yaml
 *   (decode-filter; precise-prefix-cache-scorer 2.0, kv-cache-utilization-scorer 1.0,
 *   queue-scorer 1.0; max-score-picker) and pkg/plugins/scorer/utils.go (min-max normalization
 *   of the longest matches); the inference extension's default-plugins.yaml (3 / 2 / 2) for
 *   `llmd`.
 * - SGLang: sgl-project/sglang, sgl-model-gateway/src/main.rs (--cache-threshold 0.3,
 *   --balance-abs-threshold 64, --balance-rel-threshold 1.5, --max-tree-size 67108864) and
 *   src/policies/cache_aware.rs (healthy workers only).
 * - Dynamo: ai-dynamo/dynamo, docs/router/kv_cache_routing.md (--kv-overlap-score-weight 1,
 *   --router-temperature 0) and lib/llm/src/kv_router/scheduler.rs.
 * - KubeAI: substratusai/kubeai, internal/loadbalancer/balance_chwbl.go (chwblLoadOK),
 *   balance_least_load.go, api/k8s/v1/model_types.go (meanLoadFactor 125, replication 256,
 *   prefixCharLength 100; strategy LeastLoad by default).
 * None of them filters on KV usage or report age: kvroute's guards (filters.ts) must not apply
 * to them, only to kvroute's own policies.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  makePolicy,
  type PickInput,
  type Policy,
  type ReplicaView,
  type RouteRequest,
  Router,
} from '../../src/router/index.ts';
import {
  ChwblPolicy,
  chwblLoadOk,
  DEFAULT_CHWBL_LOAD_FACTOR,
  DEFAULT_CHWBL_PREFIX_BLOCKS,
} from '../../src/router/policies/chwbl.ts';
import { DEFAULT_DYNAMO_OVERLAP_WEIGHT } from '../../src/router/policies/dynamo.ts';
import { DEFAULT_VIRTUAL_NODES, HashRing, prefixHash } from '../../src/router/policies/hashRing.ts';
import {
  DEFAULT_LLMD_KV_WEIGHT,
  DEFAULT_LLMD_PREFIX_WEIGHT,
  DEFAULT_LLMD_QUEUE_WEIGHT,
} from '../../src/router/policies/llmd.ts';
import {
  DEFAULT_LLMD_PRECISE_KV_WEIGHT,
  DEFAULT_LLMD_PRECISE_PREFIX_WEIGHT,
  DEFAULT_LLMD_PRECISE_QUEUE_WEIGHT,
  precisePrefixScores,
} from '../../src/router/policies/llmdPrecise.ts';
import {
  DEFAULT_SGLANG_BALANCE_ABS_THRESHOLD,
  DEFAULT_SGLANG_BALANCE_REL_THRESHOLD,
  DEFAULT_SGLANG_CACHE_THRESHOLD,
  DEFAULT_SGLANG_TREE_BLOCKS,
} from '../../src/router/policies/sglang.ts';
import { Rng } from '../../src/util/rng.ts';
import { replicaView as view, request, stored, tokens } from '../support/routing.ts';

const PEERS = ['llmd', 'llmd-precise', 'sglang', 'dynamo', 'chwbl', 'least-load'] as const;
/** kvroute's own policies: its guards run before them. */
const GUARDED = ['cost', 'delay-cost', 'least-queued', 'round-robin', 'random'] as const;

function input(candidates: ReplicaView[], req: RouteRequest, seed = 1): PickInput {
  return {
    request: req,
    nowMs: 0,
    candidates,
    fleet: candidates.map((c) => c.name),
    fleetVersion: 1,
    rng: new Rng(seed),
  };
}

/** A 10-block prompt. */
const req10 = request('q', tokens(4, 160));

describe('filters: the peers carry only their projects, kvroute its own guards', () => {
  test('each peer says it brings its own filters; kvroute policies do not', () => {
    for (const name of PEERS) assert.equal(makePolicy(name).ownFilters, true, name);
    for (const name of GUARDED) assert.ok(!makePolicy(name).ownFilters, name);
  });

  test('a replica over the KV threshold with a stale report is still offered to a peer', () => {
    // r0 reports 99 % KV usage, 10 s ago; r1 is fresh and nearly empty. The policy is wrapped
    // to record the candidates the router offers it.
    const nowMs = 10_000;
    for (const name of PEERS) {
      const peer = makePolicy(name);
      const offered = new Set<string>();
      const recording: Policy = {
        name: peer.name,
        ownFilters: peer.ownFilters,
        pick: (pickInput) => {
          for (const c of pickInput.candidates) offered.add(c.name);
          return peer.pick(pickInput);
        },
        onRouted: (routed) => peer.onRouted?.(routed),
      };
      const router = new Router({ replicas: ['r0', 'r1'], policy: recording, seed: 5 });
      router.onReport('r0', { kvUsage: 0.99, running: 1, waiting: 0 }, 0);
      router.onReport('r1', { kvUsage: 0.1, running: 0, waiting: 0 }, nowMs);
      assert.equal(router.thresholds.kvThreshold, Number.POSITIVE_INFINITY, name);
      for (let i = 0; i < 5; i++) {
        const d = router.route(request(`${name}-${i}`, tokens(i, 160)), nowMs);
        assert.equal(d.failedOpen, false, `${name}: nothing was filtered`);
      }
      assert.deepEqual([...offered].sort(), ['r0', 'r1'], name);
    }
  });

  test('kvroute policies keep the guard: r0 at 99 % is skipped while r1 is eligible', () => {
    const toks = tokens(9, 160);
    for (const name of GUARDED) {
      const router = new Router({ replicas: ['r0', 'r1'], policy: name, seed: 5 });
      router.applyEvents('r0', [stored(toks)], 0);
      router.onReport('r0', { kvUsage: 0.99, running: 1, waiting: 0 }, 0);
      router.onReport('r1', { kvUsage: 0.1, running: 0, waiting: 0 }, 0);
      for (let i = 0; i < 10; i++) {
        const d = router.route(request(`${name}-${i}`, toks), 0);
        assert.equal(d.replica, 'r1', name);
      }
    }
  });

  test('a down replica is skipped by every peer', () => {
    for (const name of PEERS) {
      const router = new Router({ replicas: ['r0', 'r1', 'r2'], policy: name, seed: 2 });
      router.markDown('r1');
      for (let i = 0; i < 30; i++) {
        assert.notEqual(router.route(request(`${name}-${i}`, tokens(i, 64)), 0).replica, 'r1');
      }
    }
  });
});

describe('llm-d', () => {
  test('llmd-precise: the precise-prefix example config, weights 2 / 1 / 1', () => {
    assert.equal(DEFAULT_LLMD_PRECISE_PREFIX_WEIGHT, 2);
    assert.equal(DEFAULT_LLMD_PRECISE_KV_WEIGHT, 1);
    assert.equal(DEFAULT_LLMD_PRECISE_QUEUE_WEIGHT, 1);
    // llmd: the inference extension's default-plugins.yaml, prefix 3, queue 2, KV 2.
    assert.deepEqual(
      [DEFAULT_LLMD_PREFIX_WEIGHT, DEFAULT_LLMD_QUEUE_WEIGHT, DEFAULT_LLMD_KV_WEIGHT],
      [3, 2, 2],
    );
  });

  test('precise prefix: min-max over the replicas that match, 1 when they match alike, 0 without', () => {
    assert.deepEqual(precisePrefixScores([0, 4, 8, 6]), [0, 0, 1, 0.5]);
    assert.deepEqual(precisePrefixScores([3, 0, 3]), [1, 0, 1]);
    assert.deepEqual(precisePrefixScores([0, 5]), [0, 1], 'one matching replica scores 1');
    assert.deepEqual(precisePrefixScores([0, 0]), [0, 0]);
  });

  test('llmd-precise scores 2 x prefix + 1 x (1 - kv) + 1 x queue, the maximum wins', () => {
    // r0: 6 blocks, kv 0.9, 4 waiting; r1: 2 blocks, kv 0.1, 0 waiting; r2: nothing, kv 0, 2 waiting.
    const views = [
      view(0, { cachedBlocks: 6, kvUsage: 0.9, waiting: 4 }),
      view(1, { cachedBlocks: 2, kvUsage: 0.1, waiting: 0 }),
      view(2, { kvUsage: 0, waiting: 2 }),
    ];
    const pick = makePolicy('llmd-precise').pick(input(views, req10));
    const scores = pick.scores!.map((s) => Math.round(s * 1000) / 1000);
    // prefix [1, 0, 0]; kv [0.1, 0.9, 1]; queue [0, 1, 0.5].
    assert.deepEqual(scores, [2.1, 1.9, 1.5]);
    assert.equal(pick.replicaId, 0);
  });
});

describe('SGLang', () => {
  test('the command line defaults: 0.3, 64, 1.5, a tree of 67,108,864 characters', () => {
    assert.equal(DEFAULT_SGLANG_CACHE_THRESHOLD, 0.3);
    assert.equal(DEFAULT_SGLANG_BALANCE_ABS_THRESHOLD, 64);
    assert.equal(DEFAULT_SGLANG_BALANCE_REL_THRESHOLD, 1.5);
    // 67,108,864 characters at 4 a token, in blocks of 16 tokens.
    assert.equal(DEFAULT_SGLANG_TREE_BLOCKS, 67_108_864 / 4 / 16);
  });

  test('imbalanced only when both thresholds are passed (AND, as select_worker checks)', () => {
    const router = (loads: number[]) =>
      makePolicy('sglang').pick(
        input(
          loads.map((l, i) => view(i, { inFlight: l })),
          req10,
        ),
      );
    // No tree yet: below the cache threshold, so the least loaded wins either way; the
    // imbalance branch answers with in-flight scores, the cache branch too: the pick shows it.
    assert.equal(router([100, 30]).replicaId, 1);
    assert.equal(router([60, 0]).replicaId, 1);
  });
});

describe('Dynamo', () => {
  test('overlap weight 1, temperature 0: the lowest cost wins', () => {
    assert.equal(DEFAULT_DYNAMO_OVERLAP_WEIGHT, 1);
    // r0: 8 of 10 blocks cached, 5 decode blocks: 1 x (0 + 10 - 8) + 5 = 7.
    // r1: nothing cached, idle: 1 x 10 + 0 = 10.
    const views = [view(0, { cachedBlocks: 8, activeDecodeBlocks: 5 }), view(1)];
    const pick = makePolicy('dynamo').pick(input(views, req10));
    assert.deepEqual(pick.scores, [7, 10]);
    assert.equal(pick.replicaId, 0);
  });
});

describe('KubeAI', () => {
  test('PrefixHash defaults: meanLoadFactor 125 %, replication 256, 100 characters of prefix', () => {
    assert.equal(DEFAULT_CHWBL_LOAD_FACTOR, 1.25);
    assert.equal(DEFAULT_VIRTUAL_NODES, 256);
    // 100 characters, about 25 tokens: the key of the second 16-token block.
    assert.equal(DEFAULT_CHWBL_PREFIX_BLOCKS, 2);
  });

  test('chwblLoadOK: no load in flight passes; else load + 1 <= (total + 1) / n x factor', () => {
    assert.equal(chwblLoadOk(9, 0, 4, 1.25), true, 'total 0: always');
    // total 10, n 4: (11 / 4) x 1.25 = 3.4375.
    assert.equal(chwblLoadOk(2, 10, 4, 1.25), true, '3 <= 3.4375');
    assert.equal(chwblLoadOk(3, 10, 4, 1.25), false, '4 > 3.4375');
  });

  test('chwbl walks from the key owner past loaded endpoints; when none passes, the owner', () => {
    const fleet = ['r0', 'r1', 'r2', 'r3'];
    const owner = (() => {
      const ring = new HashRing(fleet, 1, DEFAULT_VIRTUAL_NODES);
      return ring.walk(prefixHash(req10, DEFAULT_CHWBL_PREFIX_BLOCKS), () => true);
    })();
    const pick = (loads: number[]) =>
      new ChwblPolicy().pick(
        input(
          loads.map((l, i) => view(i, { inFlight: l })),
          req10,
        ),
      ).replicaId;
    assert.equal(pick([0, 0, 0, 0]), owner, 'idle: the owner');
    const loaded = [2, 2, 2, 2];
    loaded[owner] = 3; // total 9: (10 / 4) x 1.25 = 3.125; the owner's 4 > 3.125, the others' 3 pass
    assert.notEqual(pick(loaded), owner);
    // Every endpoint at 1 of 2: total 2, (3 / 2) x 1.25 = 1.875 < 2: none passes, the owner takes it.
    const two = new ChwblPolicy().pick(
      input([view(0, { inFlight: 1 }), view(1, { inFlight: 1 })], req10),
    ).replicaId;
    const ownerOfTwo = new HashRing(['r0', 'r1'], 1, DEFAULT_VIRTUAL_NODES).walk(
      prefixHash(req10, DEFAULT_CHWBL_PREFIX_BLOCKS),
      () => true,
    );
    assert.equal(two, ownerOfTwo);
  });

  test('least-load: the fewest in flight; ties to a seeded draw that covers them all', () => {
    const views = [view(0, { inFlight: 3 }), view(1, { inFlight: 1 }), view(2, { inFlight: 1 })];
    const seen = new Set<number>();
    for (let seed = 1; seed <= 40; seed++) {
      const id = makePolicy('least-load').pick(input(views, req10, seed)).replicaId;
      assert.notEqual(id, 0);
      seen.add(id);
    }
    assert.deepEqual([...seen].sort(), [1, 2]);
  });
});
