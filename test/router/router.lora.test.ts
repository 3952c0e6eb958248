/** LoRA-aware routing: the cost's adapter term, the free-slot guard, llm-d's LoRA affinity. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import {
  DEFAULT_LORA_LOAD_TOKENS,
  makePolicy,
  NO_LORA,
  type PickInput,
  parseLoraRequestsInfo,
  type ReplicaView,
  Router,
  type RouteRequest,
} from '../../src/router/index.ts';
import { loraAffinity } from '../../src/router/policies/llmd.ts';
import { loraLoadMs, resolveLoraConfig } from '../../src/engine/lora.ts';
import { makeReplicaSpec, prefillUsPerToken } from '../../src/model/index.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView, stored, tokens } from '../support/routing.ts';

const PROMPT = tokens(5, 1_000);

function loraRequest(id: string, lora?: string, toks = PROMPT): RouteRequest {
  return {
    id,
    blockKeys: computeBlockKeys(toks, BLOCK, { loraName: lora }),
    promptTokens: toks.length,
    blockSize: BLOCK,
    ...(lora && { lora }),
  };
}

const input = (request: RouteRequest, candidates: ReplicaView[]): PickInput => ({
  request,
  nowMs: 0,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

const lora = (resident: boolean) => ({ ...NO_LORA, resident });

describe('cost: the adapter load term', () => {
  test('the default is the engine model of the seed replica in prefill tokens', () => {
    const spec = makeReplicaSpec();
    const ms = loraLoadMs(spec.model, resolveLoraConfig({ maxLoras: 1 }));
    assert.equal(Math.round((ms * 1000) / prefillUsPerToken(spec)), DEFAULT_LORA_LOAD_TOKENS);
  });

  test('a replica where the adapter is not resident costs its load time more', () => {
    const policy = makePolicy('cost', { loraLoadTokens: 500 });
    const views = [
      replicaView(0, { queuedPromptTokens: 400, lora: lora(true) }),
      replicaView(1, { queuedPromptTokens: 0, lora: lora(false) }),
    ];
    const pick = policy.pick(input(loraRequest('q', 'sql'), views));
    assert.deepEqual(pick.scores, [400 + 1_000, 0 + 1_000 + 500]);
    assert.equal(pick.replicaId, 0, 'a queue of 400 tokens is cheaper than a 500-token load');
    const blind = makePolicy('cost', { loraLoadTokens: 500, loraBlind: true });
    assert.equal(blind.pick(input(loraRequest('q', 'sql'), views)).replicaId, 1);
    assert.equal(blind.loraAware, false);
  });

  test('without an adapter the scores are exactly the seed formula', () => {
    const policy = makePolicy('cost');
    const views = [
      replicaView(0, { queuedPromptTokens: 7, cachedBlocks: 10, lora: lora(false) }),
      replicaView(1, { queuedPromptTokens: 3 }),
    ];
    const pick = policy.pick(input(loraRequest('q'), views));
    assert.deepEqual(pick.scores, [7 + 1_000 - 160, 3 + 1_000]);
  });
});

describe('router: free adapter slots, residency, fail open', () => {
  const report = (running: string[], waiting: string[] = [], maxLoras = 1) => ({
    kvUsage: 0.1,
    running: running.length,
    waiting: waiting.length,
    loras: { running, waiting, maxLoras },
  });

  test('a replica without a free slot is skipped while another has one', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 3 });
    router.onReport('a', report(['x']), 0);
    router.onReport('b', report([]), 0);
    // a holds the prompt's blocks under y, but runs x with max_loras 1.
    router.applyEvents(
      'a',
      [stored(PROMPT, computeBlockKeys(PROMPT, BLOCK, { loraName: 'y' }))],
      0,
    );
    const d = router.route(loraRequest('r1', 'y'), 1);
    assert.equal(d.replica, 'b', 'no slot for y on a');
    assert.equal(d.failedOpen, false);
    // The same adapter that runs on a may go there.
    assert.equal(router.route(loraRequest('r2', 'x'), 1).replica, 'a');
    // LoRA-blind: the cache wins, the slot is ignored.
    const blind = new Router({ replicas: ['a', 'b'], seed: 3, policyOptions: { loraBlind: true } });
    blind.onReport('a', report(['x']), 0);
    blind.onReport('b', report([]), 0);
    blind.applyEvents('a', [stored(PROMPT, computeBlockKeys(PROMPT, BLOCK, { loraName: 'y' }))], 0);
    assert.equal(blind.route(loraRequest('r1', 'y'), 1).replica, 'a');
  });

  test('no replica with a free slot: fail open to the policy over all eligible ones', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 3 });
    router.onReport('a', report(['x']), 0);
    router.onReport('b', report(['z']), 0);
    router.applyEvents(
      'b',
      [stored(PROMPT, computeBlockKeys(PROMPT, BLOCK, { loraName: 'y' }))],
      0,
    );
    const d = router.route(loraRequest('r1', 'y'), 1);
    assert.equal(d.replica, 'b', 'the cost picks among all: b caches the prompt');
  });

  test("the router's own routes fill slots before any report says so", () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 3 });
    router.onReport('a', report([]), 0);
    router.onReport('b', report([]), 0);
    const first = router.route(loraRequest('r1', 'x'), 1).replica;
    const other = first === 'a' ? 'b' : 'a';
    // first now has x in flight; y needs a slot, which only the other has, whatever the queues.
    for (let i = 0; i < 4; i++) {
      assert.equal(router.route(loraRequest(`y${i}`, 'y', tokens(6 + i, 1_000)), 1).replica, other);
    }
    const adapters = () =>
      Object.fromEntries(
        router.snapshot().replicas.map((r) => [r.name, [r.loraAdapters, r.maxLoras]]),
      );
    assert.deepEqual(adapters(), { [first]: [['x'], 1], [other]: [['y'], 1] });
    router.onFirstToken('r1', 2);
    router.onFinished('r1', 3);
    assert.deepEqual(adapters()[first], [[], 1]);
    // Finished, x is still taken as resident on a (the last adapter routed there).
    const views: ReplicaView[] = [];
    const spy = new Router({
      replicas: ['a', 'b'],
      seed: 3,
      policy: {
        name: 'spy',
        pick: (i) => {
          views.push(...i.candidates);
          return { replicaId: i.candidates[0]!.id };
        },
      },
    });
    spy.onReport('a', report([]), 0);
    spy.route(loraRequest('s1', 'x'), 1);
    spy.onFinished('s1', 2);
    spy.route(loraRequest('s2', 'x'), 3);
    assert.deepEqual(
      views.slice(-2).map((v) => [v.name, v.lora.resident]),
      [
        ['a', true],
        ['b', false],
      ],
    );
  });

  test('a retry releases the adapter where it was first routed', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 3 });
    router.onReport('a', report([]), 0);
    router.onReport('b', report([]), 0);
    const first = router.route(loraRequest('r1', 'x'), 1);
    const retry = router.route({ ...loraRequest('r1', 'x'), avoid: [first.replica] }, 2);
    assert.notEqual(retry.replica, first.replica);
    const adapters = Object.fromEntries(
      router.snapshot().replicas.map((r) => [r.name, r.loraAdapters]),
    );
    assert.deepEqual(adapters[first.replica], []);
    assert.deepEqual(adapters[retry.replica], ['x']);
  });
});

describe("llm-d's LoRA affinity scorer", () => {
  test('1 active, 0.8 room to load, 0.6 waiting, 0 full', () => {
    const v = (running: boolean, waiting: boolean, active: number, maxLoras?: number) => ({
      running,
      waiting,
      resident: running || waiting,
      active,
      maxLoras,
    });
    assert.equal(loraAffinity(v(true, false, 2, 2)), 1);
    assert.equal(loraAffinity(v(false, false, 1, 2)), 0.8);
    assert.equal(loraAffinity(v(false, false, 5, undefined)), 0.8);
    assert.equal(loraAffinity(v(false, true, 2, 2)), 0.6);
    assert.equal(loraAffinity(v(false, false, 2, 2)), 0);
  });

  test('the llmd policy adds it with weight 1 for adapter requests only', () => {
    const policy = makePolicy('llmd');
    const views = [
      replicaView(0, {
        lora: { ...NO_LORA, running: true, resident: true, active: 1, maxLoras: 1 },
      }),
      replicaView(1, { lora: { ...NO_LORA, resident: false, active: 1, maxLoras: 1 } }),
    ];
    const withLora = policy.pick(input(loraRequest('q', 'sql'), views));
    assert.deepEqual(withLora.scores, [2 + 2 + 1, 2 + 2 + 0]);
    assert.deepEqual(policy.pick(input(loraRequest('q'), views)).scores, [4, 4]);
    const blind = makePolicy('llmd', { loraBlind: true });
    assert.deepEqual(blind.pick(input(loraRequest('q', 'sql'), views)).scores, [4, 4]);
  });
});

test('vllm:lora_requests_info labels read as a report', () => {
  assert.deepEqual(
    parseLoraRequestsInfo({
      max_lora: '4',
      running_lora_adapters: 'sql,chat',
      waiting_lora_adapters: '',
    }),
    { running: ['sql', 'chat'], waiting: [], maxLoras: 4 },
  );
  assert.equal(parseLoraRequestsInfo({ running_lora_adapters: 'a' }), null);
});
