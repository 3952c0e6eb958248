/**
 * Live: flow control's pass on the P/D path. Two prefill engines that run one sequence each
 * (max-num-seqs 1) and one decode engine (vLLM's NixlConnector protocol) behind a gateway with
 * `--flow-control --flow-release owner` (finish-first on, as by default) and the cache-blind
 * `least-queued` policy, with saturation limits the test never reaches (so every request goes
 * straight on, with its pass).
 *
 * A prompt's prefix is cached on one prefill replica (its owner). The owner's engine is then
 * held by a long stream sent to it directly, and a short request sharing the prefix's start is
 * routed there through the gateway, where its prefill waits: the owner has prompt tokens queued
 * in the router's ledger, the other prefill replica none. A request of the whole prefix then
 * arrives: the router alone (least-queued) would prefill it on the other replica; finish-first
 * names the owner (a few uncached tokens behind a short queue end before a cold prefill), and
 * its prefill goes there (`x-kvroute-prefill-replica`), once the owner is free. The decode
 * replica, which pulled the prefix, is never named for the prefill. Counts, statuses and
 * replicas only, never times.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type OpenAI from 'openai';
import { backendOf } from '../../src/embedded/fleet.ts';
import { parseKvTransferConfig } from '../../src/engine/connector/kvTransferConfig.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { applyConfigDoc } from '../../src/serving/config.ts';
import type { BackendRole } from '../../src/serving/pdRoles.ts';
import { flowClient, hold, metricSum } from '../support/flowGateway.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngine,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';

const HANG_GUARD_MS = 120_000;
const PREFIX_TOKENS = 512;
const nixl = parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"kv_both"}');
// The fleet's engines share a transfer secret: without one their side channel is closed.
const ENGINE = {
  servedModelName: 'm',
  kvTransferConfig: nixl,
  kvTransferSecret: 'pd-fleet-secret',
  maxModelLen: 16_384,
};

const prefill: EngineServerHandle[] = [];
let decode: EngineServerHandle;
let gw: GatewayHandle;

const nameOf = (e: EngineServerHandle) => new URL(e.url).host;

before(async () => {
  for (let i = 0; i < 2; i++) prefill.push(await startEngine({ ...ENGINE, seed: i, maxSeqs: 1 }));
  decode = await startEngine({ ...ENGINE, seed: 10, speedup: 200 });
  const withRole = (e: EngineServerHandle, role: BackendRole) => ({ ...backendOf(e), role });
  const doc = {
    policy: 'least-queued',
    'flow-control': {
      enabled: true,
      'max-wait-ms': HANG_GUARD_MS,
      release: 'owner',
      'owner-slack-tokens': 16,
      'owner-hold-ms': HANG_GUARD_MS,
      saturation: { 'queue-depth': 100, 'kv-usage': 1, 'queued-prefill-ms': 1_000_000 },
    },
  };
  gw = await startGateway(
    applyConfigDoc(
      doc,
      configFor([...prefill, decode], {
        backends: [...prefill.map((e) => withRole(e, 'prefill')), withRole(decode, 'decode')],
      }),
    ),
  );
  await waitFor(async () => (await replicas(gw)).every((r) => r.healthy), 'replicas healthy');
});

after(async () => {
  await gw?.close();
  for (const e of [...prefill, decode]) await e?.close();
});

/** A completion of `prompt` through the gateway: its status and both legs' replicas. */
async function complete(
  client: OpenAI,
  prompt: number[],
): Promise<{ status: number; prefill: string | null; decode: string | null }> {
  const { response } = await client.completions
    .create({ model: 'm', prompt, max_tokens: 2 })
    .withResponse();
  return {
    status: response.status,
    prefill: response.headers.get('x-kvroute-prefill-replica'),
    decode: response.headers.get('x-kvroute-replica'),
  };
}

test("P/D with flow control: the prefill leg goes to the replica finish-first's pass names, not the router's pick", async () => {
  const client = flowClient(gw, HANG_GUARD_MS);
  const prefix = tokens(57, PREFIX_TOKENS);
  const first = await within(30_000, complete(client, [...prefix, 1, 2]), 'the first');
  assert.equal(first.status, 200);
  assert.equal(first.decode, nameOf(decode));
  const owner = first.prefill!;
  const other = prefill.map(nameOf).find((n) => n !== owner)!;
  assert.ok(prefill.map(nameOf).includes(owner), `prefilled on a prefill replica: ${owner}`);
  const on = async (name: string) => (await replicas(gw)).find((r) => r.name === name)!;
  await waitFor(async () => (await on(owner)).indexedBlocks > 0, "the owner's blocks indexed");
  // The owner's one sequence, held by a stream sent to its engine directly.
  const ownerEngine = prefill.find((e) => nameOf(e) === owner)!;
  const held = await within(
    30_000,
    hold(flowClient(ownerEngine, HANG_GUARD_MS), 'm', tokens(58, 32)),
    'the stream on the owner',
  );
  try {
    // A short request sharing the prefix's first 64 tokens: finish-first sends it to the owner
    // (2 uncached tokens there), where its prefill waits behind the stream.
    const filler = complete(client, [...prefix.slice(0, 64), 3, 4]);
    await waitFor(async () => (await on(owner)).queuedPromptTokens > 0, 'the filler queued');
    // What least-queued reads: the owner has prompt tokens queued, the other replica none.
    assert.equal((await on(other)).queuedPromptTokens, 0);
    const routedBefore = await metricSum(gw, 'kvroute_gateway_pd_decisions_total');
    const next = complete(client, [...prefix, 5, 6]);
    await waitFor(
      async () => (await on(owner)).inFlight === 2,
      "the next request's prefill queued on the owner",
      HANG_GUARD_MS,
    );
    assert.equal((await on(other)).inFlight, 0, 'nothing on the other prefill replica');
    assert.equal(await metricSum(gw, 'kvroute_gateway_pd_decisions_total'), routedBefore + 1);
    await held.release();
    const [f, n] = await within(HANG_GUARD_MS, Promise.all([filler, next]), 'both answers');
    assert.deepEqual(f, { status: 200, prefill: owner, decode: nameOf(decode) });
    assert.deepEqual(n, { status: 200, prefill: owner, decode: nameOf(decode) });
    // Nothing waited in the gateway: both went straight on, each with its pass.
    assert.equal(await metricSum(gw, 'kvroute_flow_dispatched_total'), 0);
  } finally {
    await held.release();
  }
  await waitFor(
    async () => (await replicas(gw)).every((r) => r.inFlight === 0 && r.queuedPromptTokens === 0),
    'ledger at zero',
  );
});
