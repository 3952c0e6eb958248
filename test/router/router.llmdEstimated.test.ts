/**
 * llm-d's estimated prefix-cache scorer as of September 2025 (Gateway API inference extension
 * v1.0.1, pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go and indexer.go), modelled
 * by approxForgetting.ts's `llmd` mode and the `llmd` policy's `prefixMaxBlocks`:
 * - blocks of hashBlockSize characters at 4 a token, its LRU and its 256-block cut in the
 *   engine's blocks;
 * - only the first maxPrefixBlocksToMatch blocks are hashed, so recorded and scored
 *   (matchLen / len(hashes));
 * - a route's hashes enter the pod's LRU in prompt order (`indexer.Add`), so when the LRU is
 *   full a route's first block goes first and its whole prefix stops matching.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  approxForgetting,
  DEFAULT_LLMD_PREFIX_CONFIG,
  llmdPrefixForgetting,
  lruForgetting,
} from '../../src/router/index/approxForgetting.ts';
import { ApproxIndex } from '../../src/router/index/approxIndex.ts';
import { Router } from '../../src/router/index.ts';
import type { PickInput, ReplicaView, RouteRequest } from '../../src/router/policy.ts';
import { LlmdPolicy } from '../../src/router/policies/llmd.ts';
import { Rng } from '../../src/util/rng.ts';
import { replicaView as view, request, tokens } from '../support/routing.ts';

const BLOCK = 16;

describe("llm-d's prefix-cache-scorer parameters in the engine's blocks", () => {
  test('defaults: 64 characters = 16 tokens a block, 31,250 of them, the first 256 hashed', () => {
    assert.deepEqual(DEFAULT_LLMD_PREFIX_CONFIG, {
      hashBlockSize: 64,
      maxPrefixBlocksToMatch: 256,
      lruCapacityPerServer: 31_250,
    });
    assert.deepEqual(approxForgetting('llmd', 16, 1), {
      capacityBlocks: 31_250,
      sweepMs: 0,
      ttlMs: 0,
      trimToRatio: 1,
      maxPrefixBlocks: 256,
      recordInPromptOrder: true,
    });
    // Blocks of 64 tokens: 500,000 tokens = 7,812.5 blocks, 4,096 tokens = 64 blocks.
    const at64 = approxForgetting('llmd', 64, 1);
    assert.equal(at64.capacityBlocks, 7813);
    assert.equal(at64.maxPrefixBlocks, 64);
  });

  test("the 37-capacity report's: 256 characters = 64 tokens, 2,200 of them, 256 hashed", () => {
    const f = llmdPrefixForgetting(
      { hashBlockSize: 256, maxPrefixBlocksToMatch: 256, lruCapacityPerServer: 2200 },
      64,
    );
    assert.equal(f.capacityBlocks, 2200);
    assert.equal(f.maxPrefixBlocks, 256);
    // Given to approxForgetting, the same.
    assert.deepEqual(
      approxForgetting('llmd', 64, 1, {
        hashBlockSize: 256,
        maxPrefixBlocksToMatch: 256,
        lruCapacityPerServer: 2200,
      }),
      f,
    );
    // Never below one block.
    const tiny = llmdPrefixForgetting(
      { hashBlockSize: 4, maxPrefixBlocksToMatch: 1, lruCapacityPerServer: 1 },
      64,
    );
    assert.equal(tiny.capacityBlocks, 1);
    assert.equal(tiny.maxPrefixBlocks, 1);
  });
});

/** One replica whose approximate record forgets as `forgetting` says. */
function approxRouter(forgetting: ReturnType<typeof lruForgetting>): Router {
  return new Router({
    replicas: ['a'],
    policy: 'round-robin',
    indexMode: 'approx',
    approxForgetting: forgetting,
  });
}

function routeTwice(router: Router, toks: number[]): number {
  router.route(request('first', toks), 0);
  router.onFinished('first', 0);
  return router.route(request('again', toks), 10).cachedTokens;
}

describe('the record: only the first blocks, in prompt order', () => {
  test('a 10-block prompt routed twice: 4 blocks cached when only 4 are hashed', () => {
    const toks = tokens(1, 10 * BLOCK);
    const capped = approxRouter({ ...lruForgetting(1000), maxPrefixBlocks: 4 });
    assert.equal(routeTwice(capped, toks), 4 * BLOCK);
    const whole = approxRouter(lruForgetting(1000));
    assert.equal(routeTwice(whole, toks), 10 * BLOCK);
  });

  test("a peer router's tail (from block 2 on) records only what lies under the cut", () => {
    const keys = request('t', tokens(7, 10 * BLOCK)).blockKeys;
    const index = new ApproxIndex(1, 1000, 0, { ...lruForgetting(1000), maxPrefixBlocks: 4 });
    index.recordRoute(0, keys.slice(2), 0, 2);
    assert.equal(index.blockCount(0), 2);
    index.recordRoute(0, keys.slice(5), 0, 5);
    assert.equal(index.blockCount(0), 2);
  });

  test('past the LRU, prompt order loses the first route whole; last-first keeps its root', () => {
    // An LRU of 6 blocks; two 4-block prompts: the first route's 2 oldest blocks go.
    const a = tokens(100, 4 * BLOCK);
    const b = tokens(200, 4 * BLOCK);
    const matchOfA = (inPromptOrder: boolean) => {
      const router = approxRouter({ ...lruForgetting(6), recordInPromptOrder: inPromptOrder });
      router.route(request('a', a), 0);
      router.route(request('b', b), 1);
      return router.route(request('a-again', a), 2).cachedTokens;
    };
    // llm-d: blocks a0 and a1 are the least recent, so a matches nothing.
    assert.equal(matchOfA(true), 0);
    // kvroute's own order: a2 and a3 go, a's first two blocks still match.
    assert.equal(matchOfA(false), 2 * BLOCK);
  });
});

function pickInput(candidates: ReplicaView[], req: RouteRequest): PickInput {
  return {
    request: req,
    nowMs: 0,
    candidates,
    fleet: candidates.map((c) => c.name),
    fleetVersion: 1,
    rng: new Rng(1),
  };
}

describe('the score: matched over the hashed blocks', () => {
  const req10 = request('q', tokens(4, 10 * BLOCK));

  test('prefixMaxBlocks 4: a replica holding the 4 hashed blocks scores a full prefix', () => {
    const views = [view(0, { cachedBlocks: 4 }), view(1, { cachedBlocks: 2 })];
    const weights = { prefixWeight: 1, kvWeight: 0, queueWeight: 0 };
    const capped = new LlmdPolicy({ ...weights, prefixMaxBlocks: 4 }).pick(pickInput(views, req10));
    assert.deepEqual(capped.scores, [1, 0.5]);
    const whole = new LlmdPolicy(weights).pick(pickInput(views, req10));
    assert.deepEqual(whole.scores, [0.4, 0.2]);
  });

  test('weights 1/1/1 spill from a loaded owner that 3/2/2 keeps', () => {
    // r0 owns the whole prompt with 4 waiting; r1 has nothing and none waiting; KV 20 % and 10 %.
    const views = [
      view(0, { cachedBlocks: 10, waiting: 4, kvUsage: 0.2 }),
      view(1, { cachedBlocks: 0, waiting: 0, kvUsage: 0.1 }),
    ];
    // 1/1/1 (the 73-capacity report's estimated-scheduling): r0 1 + 0 + 0.8 = 1.8, r1 0 + 1 + 0.9.
    const even = new LlmdPolicy({ prefixWeight: 1, kvWeight: 1, queueWeight: 1 });
    const evenPick = even.pick(pickInput(views, req10));
    assert.deepEqual(
      evenPick.scores!.map((x) => Math.round(x * 1000) / 1000),
      [1.8, 1.9],
    );
    assert.equal(evenPick.replicaId, 1);
    // 3/2/2 (llmd's defaults): r0 3 + 0 + 1.6 = 4.6, r1 0 + 2 + 1.8 = 3.8.
    assert.equal(new LlmdPolicy().pick(pickInput(views, req10)).replicaId, 0);
  });
});
