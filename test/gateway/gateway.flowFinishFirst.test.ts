/**
 * `kvroute serve --flow-control --flow-release owner` with finish-first (on by default, as in
 * the simulator) end to end: two simulated engines that run one sequence each
 * (max-num-seqs 1), a gateway that calls a replica saturated while a prompt it routed there
 * waits for its first token (queued-prefill-ms 0) or its engine reports one waiting
 * (queue-depth 0), and the `openai` client with two tenants (the x-kvroute-tenant header).
 *
 * Prefix A is cached on one replica (its owner), prefix B on the other; each is held by a long
 * stream of its prefix and a request waiting on its engine, so the pool is saturated. The heavy
 * tenant sends two requests of prefix A, the sparse tenant one that shares half of prefix A:
 * all three wait in the gateway.
 * When the other replica's stream ends, it has room again: the sparse tenant's request (its
 * tenant has nothing else queued) goes there at once, where its prefill ends first, while the
 * heavy tenant's two (a backlog) keep waiting for their owner, which serves them once its own
 * stream ends. With finish-first off, the sparse request waits for the owner as well. Every
 * request ends 200. Counts, statuses and replicas only, never times.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { applyConfigDoc } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngines,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';
import { flowClient, hold, metricSum, served } from '../support/flowGateway.ts';

const HANG_GUARD_MS = 120_000;
const PREFIX_TOKENS = 256;

function flowDoc(finishFirst: boolean): object {
  return {
    'flow-control': {
      enabled: true,
      'max-wait-ms': HANG_GUARD_MS,
      release: 'owner',
      'owner-slack-tokens': 16,
      'owner-hold-ms': HANG_GUARD_MS,
      ...(!finishFirst && { 'finish-first': false }),
      saturation: { 'queue-depth': 0, 'queued-prefill-ms': 0 },
    },
    // One cache salt: the two tenants' prompts share cached blocks (a tenant's own salt would
    // keep each one's cache apart, and the sparse request would cache nothing anywhere).
    tenants: { heavy: { 'cache-salt': 'shared' }, sparse: { 'cache-salt': 'shared' } },
  };
}

type Served = { status: number; replica: string | null };

/**
 * Caches `prefix` (the heavy tenant's) on a replica, then holds it: a stream, and a request
 * waiting on its engine until the replica's report shows it waiting.
 */
async function busyOwner(
  gw: GatewayHandle,
  model: string,
  prefix: number[],
): Promise<{ owner: string; filler: Promise<Served>; stream: { release(): Promise<void> } }> {
  const client = flowClient(gw, HANG_GUARD_MS, 'heavy');
  const first = await within(30_000, served(client, model, [...prefix, 1, 2]), 'the first');
  assert.equal(first.status, 200);
  const owner = first.replica!;
  await waitFor(
    async () => ((await replicas(gw)).find((r) => r.name === owner)?.indexedBlocks ?? 0) > 0,
    "the owner's blocks in the router's index",
  );
  const stream = await within(30_000, hold(client, model, [...prefix, 3, 4]), 'the stream');
  assert.equal(stream.replica, owner, 'the stream goes to the prefix owner');
  const streaming = Date.now();
  await waitFor(async () => {
    const r = (await replicas(gw)).find((x) => x.name === owner);
    return (r?.reportedAtMs ?? 0) > streaming && r?.waiting === 0;
  }, "the owner's report of the running stream");
  const filler = served(client, model, [...prefix, 5, 6]);
  // The report of the filler waiting: the owner is closed besides its queued prefill too, so
  // finish-first does not count it among the replicas a request could wait for.
  await waitFor(async () => {
    const r = (await replicas(gw)).find((x) => x.name === owner);
    return (r?.waiting ?? 0) > 0;
  }, 'the filler waiting on the owner');
  return { owner, filler, stream };
}

describe('kvroute serve --flow-release owner: finish-first for a sparse tenant', () => {
  let engines: EngineServerHandle[];
  const gateways: GatewayHandle[] = [];
  let model: string;
  before(async () => {
    engines = await startEngines(2, { maxSeqs: 1 });
    model = engines[0]!.servedModelName;
  });
  after(async () => {
    for (const gw of gateways) await gw.close();
    for (const e of engines ?? []) await e.close();
  });

  for (const finishFirst of [true, false]) {
    test(
      finishFirst
        ? "a sparse tenant's request goes where it finishes first while a backlogged tenant waits for its owner"
        : 'with finish-first off the sparse request waits for the owner too',
      async () => {
        const gw = await startGateway(applyConfigDoc(flowDoc(finishFirst), configFor(engines)));
        gateways.push(gw);
        const seed = finishFirst ? 21 : 22;
        const prefixA = tokens(seed, PREFIX_TOKENS);
        const a = await busyOwner(gw, model, prefixA);
        // Prefix B's first request goes to the other replica: the owner has no room.
        const b = await busyOwner(gw, model, tokens(seed + 100, PREFIX_TOKENS));
        try {
          assert.notEqual(b.owner, a.owner, 'prefix B on the other replica');
          const heavy = flowClient(gw, HANG_GUARD_MS, 'heavy');
          const sparse = flowClient(gw, HANG_GUARD_MS, 'sparse');
          const h1 = served(heavy, model, [...prefixA, 7, 8]);
          const h2 = served(heavy, model, [...prefixA, 9, 10]);
          await waitFor(
            async () => (await metricSum(gw, 'kvroute_flow_queued')) === 2,
            "the heavy tenant's two queued",
            HANG_GUARD_MS,
          );
          // The sparse tenant's prompt shares half of prefix A: the owner caches that half, the
          // other replica nothing; served there, it leaves the other replica only half of A, too
          // little (owner-slack-tokens 16) for the heavy tenant's requests to go there.
          const half = PREFIX_TOKENS / 2;
          const s1 = served(sparse, model, [
            ...prefixA.slice(0, half),
            ...tokens(seed + 200, half),
            11,
            12,
          ]);
          await waitFor(
            async () => (await metricSum(gw, 'kvroute_flow_queued')) === 3,
            "the sparse tenant's request queued",
            HANG_GUARD_MS,
          );
          // The other replica's stream ends: once its filler is served it has room.
          await b.stream.release();
          assert.deepEqual(await within(HANG_GUARD_MS, b.filler, "B's filler"), {
            status: 200,
            replica: b.owner,
          });
          if (finishFirst) {
            assert.deepEqual(await within(HANG_GUARD_MS, s1, 'the sparse request'), {
              status: 200,
              replica: b.owner,
            });
            assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 2, 'the backlog still waits');
          } else {
            // Nothing of A may leave for B's replica: the three stay queued (the hold is long).
            await waitFor(
              async () =>
                ((await replicas(gw)).find((r) => r.name === b.owner)?.reportedAtMs ?? 0) > 0 &&
                (await replicas(gw)).find((r) => r.name === b.owner)?.inFlight === 0,
              "B's replica idle",
            );
            assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 3, 'all three wait');
          }
          await a.stream.release();
          const rest = await within(
            HANG_GUARD_MS,
            Promise.all([a.filler, h1, h2, ...(finishFirst ? [] : [s1])]),
            'the requests behind the owner',
          );
          for (const r of rest) assert.deepEqual(r, { status: 200, replica: a.owner });
          assert.equal(await metricSum(gw, 'kvroute_flow_dispatched_total'), 3);
          assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 0);
        } finally {
          // A failed assertion leaves no engine held for the next test.
          await a.stream.release();
          await b.stream.release();
        }
      },
    );
  }
});
