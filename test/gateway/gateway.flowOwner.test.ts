/**
 * `kvroute serve --flow-control --flow-release owner` end to end: two simulated engines that run
 * one sequence each (max-num-seqs 1), a gateway that calls a replica saturated while a prompt it
 * routed there waits for its first token (queued-prefill-ms 0) or its engine reports one waiting
 * (queue-depth 0), and the `openai` client.
 *
 * A prompt's prefix is cached on one replica (its owner); a long stream holds the owner's one
 * sequence and a second request of the same prefix waits on its engine, so the owner has no
 * room while the other replica has room and caches nothing. A third request of that prefix:
 * - with owner release and a long hold, waits in the gateway for its owner (the other replica
 *   gets nothing), and is served by the owner once the stream is gone;
 * - with owner release and a short hold, waits, then goes to the other replica while the owner
 *   is still held;
 * - with room release (the default), goes to the other replica at once.
 * Finish-first is off here (a lone request is a sparse tenant's, which would go to the other
 * replica at once): gateway.flowFinishFirst.test.ts has it.
 * Every request ends 200. Counts, statuses and replicas only, never times.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type OpenAI from 'openai';
import { applyConfigDoc } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  waitFor,
  within,
} from '../support/gateway.harness.ts';
import { flowClient, inFlightOn, metricSum, ownerBusy } from '../support/flowGateway.ts';

const HANG_GUARD_MS = 120_000;
const PREFIX_TOKENS = 256;

function flowDoc(release: 'owner' | 'room', holdMs: number): object {
  return {
    'flow-control': {
      enabled: true,
      'max-wait-ms': HANG_GUARD_MS,
      release,
      'owner-slack-tokens': 16,
      'owner-hold-ms': holdMs,
      // A lone request here waits for its busy owner: finish-first (a sparse tenant's request
      // goes where it ends first) is test/gateway/gateway.flowFinishFirst.test.ts's.
      'finish-first': false,
      saturation: { 'queue-depth': 0, 'queued-prefill-ms': 0 },
    },
  };
}

function clientFor(gw: GatewayHandle): OpenAI {
  return flowClient(gw, HANG_GUARD_MS);
}

describe('kvroute serve --flow-release owner', () => {
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

  async function gatewayWith(release: 'owner' | 'room', holdMs: number): Promise<GatewayHandle> {
    const gw = await startGateway(applyConfigDoc(flowDoc(release, holdMs), configFor(engines)));
    gateways.push(gw);
    return gw;
  }

  test('a request waits for its busy prefix owner rather than going to the idle replica, then the owner serves it', async () => {
    const gw = await gatewayWith('owner', HANG_GUARD_MS);
    const s = await ownerBusy(gw, clientFor(gw), model, 11, PREFIX_TOKENS);
    await waitFor(
      async () => (await metricSum(gw, 'kvroute_flow_queued')) === 1,
      'the third request queued in the gateway',
      HANG_GUARD_MS,
    );
    // The idle replica had room all along and got nothing.
    assert.equal(await inFlightOn(gw, s.other), 0);
    assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 1);
    // On a busy machine the filler may have passed through the queue too (an engine report
    // from before the stream's prefill leaves the owner without room for a moment): count
    // from here.
    const dispatchedBefore = await metricSum(gw, 'kvroute_flow_dispatched_total');
    await s.stream.release();
    const [filler, third] = await within(
      HANG_GUARD_MS,
      Promise.all([s.filler, s.third]),
      'the requests behind the stream',
    );
    assert.deepEqual(filler, { status: 200, replica: s.owner });
    assert.deepEqual(third, { status: 200, replica: s.owner });
    assert.equal(
      (await metricSum(gw, 'kvroute_flow_dispatched_total')) - dispatchedBefore,
      1,
      'the third request left the queue once',
    );
    assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 0);
  });

  test('past its hold the request goes to a replica with room while the owner is still busy', async () => {
    const gw = await gatewayWith('owner', 300);
    const s = await ownerBusy(gw, clientFor(gw), model, 12, PREFIX_TOKENS);
    const third = await within(HANG_GUARD_MS, s.third, 'the third request');
    assert.deepEqual(third, { status: 200, replica: s.other });
    await s.stream.release();
    assert.deepEqual(await within(HANG_GUARD_MS, s.filler, 'the filler'), {
      status: 200,
      replica: s.owner,
    });
    assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 0);
  });

  test('room release sends it to the replica with room at once', async () => {
    const gw = await gatewayWith('room', HANG_GUARD_MS);
    const s = await ownerBusy(gw, clientFor(gw), model, 13, PREFIX_TOKENS);
    const third = await within(HANG_GUARD_MS, s.third, 'the third request');
    assert.deepEqual(third, { status: 200, replica: s.other });
    assert.equal(await metricSum(gw, 'kvroute_flow_dispatched_total'), 0);
    await s.stream.release();
    assert.deepEqual(await within(HANG_GUARD_MS, s.filler, 'the filler'), {
      status: 200,
      replica: s.owner,
    });
  });
});
