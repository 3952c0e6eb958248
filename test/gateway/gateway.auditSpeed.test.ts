/**
 * The audit's speed check, live behind the gateway: a claimed hit must also be fast. Two pools
 * in one gateway, each one engine whose hardware the backend names (`gpu=`, so the router has
 * its speed, `src/serving/backendSpeed.ts`):
 * - a consistent liar (`--fault-lie`) whose prefix cache is also emptied without a word
 *   (`--fault-silent-reset-s`): its fake `BlockStored` events make the router predict the whole
 *   prompt, it reports the whole prompt cached, so counts agree; only the time to its first
 *   token (a cold prefill of a long prompt) refutes the claim, and the audit flags it;
 * - an honest engine sent the same long prompt again and again: real hits, never flagged.
 * The engines run at modelled speed (no speedup): a 4,096-token prompt prefills cold in about
 * 1.9 s on the A100 model, and from cache in a few tens of ms; the check refutes at 75 % of the
 * cold time. Only verdicts and counts are asserted, never a time.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { backendOf } from '../../src/embedded/fleet.ts';
import type { GatewayHandle } from '../../src/gateway/gateway.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  configFor,
  type EngineServerHandle,
  startEngine,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const GPU = 'a100-80gb';
const PROMPT_TOKENS = 4096;

interface Row {
  url: string;
  audit: {
    verdict: string;
    repair: { repairs: number };
    evidence: { refuted: number; speedTested: number; poolOverflow: boolean };
  };
  subscriber: { lastSeq: string | null } | null;
}

describe('a claimed hit must also be fast', () => {
  let honest: EngineServerHandle;
  let liar: EngineServerHandle;
  let gw: GatewayHandle;

  after(async () => {
    await gw?.close();
    await honest?.close();
    await liar?.close();
  });

  test('a liar whose hits are slow is flagged by their speed; an honest engine is not', async () => {
    const common = { gpu: GPU, kvBlocks: 1024 } as const;
    honest = await startEngine({ ...common, seed: 1, servedModelName: 'honest' });
    liar = await startEngine({
      ...common,
      seed: 2,
      servedModelName: 'liar',
      faults: { lie: true, silentResetS: 0.2 },
    });
    gw = await startGateway(
      configFor([], {
        scrapeMs: 50,
        backends: [honest, liar].map((e) => ({ ...backendOf(e), gpu: GPU })),
      }),
    );
    const rows = async (): Promise<Row[]> =>
      ((await (await fetch(`${gw.url}/router/replicas`)).json()) as { replicas: Row[] }).replicas;
    const rowOf = async (e: EngineServerHandle) => (await rows()).find((r) => r.url === e.url)!;
    const settled = (e: EngineServerHandle) =>
      waitFor(async () => {
        const published = e.kvEventBatches();
        const last = (await rowOf(e))?.subscriber?.lastSeq ?? null;
        return published === 0 ? last === null : last === String(published - 1);
      }, 'KV events to settle');
    for (const e of [honest, liar]) {
      await waitFor(async () => (await rowOf(e)) !== undefined, 'the replica to be routed');
    }
    const send = async (model: string, prompt: number[]) => {
      const res = await fetch(`${gw.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, prompt, max_tokens: 1, stream: true }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    };

    const prompt = tokens(5, PROMPT_TOKENS);
    for (let i = 0; i < 12; i++) {
      await send('honest', prompt);
      await settled(honest);
    }
    const h = (await rowOf(honest)).audit;
    assert.equal(h.verdict, 'ok');
    assert.equal(h.repair.repairs, 0);
    assert.equal(h.evidence.refuted, 0, 'an honest hit refuted');
    assert.ok(h.evidence.speedTested >= 10, `speed tested ${h.evidence.speedTested} times`);

    let flaggedAt: number | null = null;
    // A flag starts a repair at once, which opens a fresh window: the evidence that led to it
    // is read off the row before.
    let before: Row['audit'] | null = null;
    for (let i = 0; i < 60 && flaggedAt === null; i++) {
      await send('liar', prompt);
      await settled(liar);
      const a = (await rowOf(liar)).audit;
      assert.equal(a.evidence.poolOverflow, false, 'the pool bound fired: not the speed check');
      if (a.verdict === 'over-predicts' || a.repair.repairs > 0) flaggedAt = i + 1;
      else before = a;
    }
    assert.ok(before !== null && before.evidence.refuted > 0, 'no claim refuted by its speed');
    assert.equal(before.evidence.refuted, before.evidence.speedTested);
    assert.ok(flaggedAt !== null, 'the liar was not flagged within 60 requests');
    const after = (await rowOf(honest)).audit;
    assert.equal(after.verdict, 'ok');
    assert.equal(after.evidence.refuted, 0);
  });
});
