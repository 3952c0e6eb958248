/**
 * The audit on a chat template the engine renders differently (`--fault-chat-template`): the
 * engine's `/tokenize` keeps the configured template, so the gateway's tokenizer probe agrees,
 * but generation renders chats with another one. The engine then reuses blocks the router,
 * keyed on its own rendering, never predicts: `under-predicts`, and the diagnosis is taken.
 * Repeats of a prompt are spaced past the predict-on-route overlay's 2 s so that only the
 * index (fed by the engine's events) predicts. The engine's pool is 1,000 blocks (the 8 prompts
 * fit): the audit's window follows the pool (`windowForPool`), 32 requests here.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { DEFAULT_OVERLAY_TTL_MS } from '../../src/router/defaults.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngine,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';

let engine: EngineServerHandle;
let gw: GatewayHandle;
let client: OpenAI;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-template-'));
  const file = join(dir, 'other.jinja');
  writeFileSync(
    file,
    '{% for m in messages %}<<{{ m.role }}>>\n{{ m.content }}\n{% endfor %}<<assistant>>\n',
  );
  engine = await startEngine({
    seed: 3,
    speedup: 100,
    kvBlocks: 1000,
    faults: { chatTemplate: file },
  });
  gw = await startGatewayFor([engine], { scrapeMs: 50 });
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await gw?.close();
  await engine?.close();
});

const system = (i: number) =>
  Array.from({ length: 400 }, (_, k) => `w${(i * 131 + k * 17) % 3000}`).join(' ');

interface AuditJson {
  verdict: string;
  window: { requests: number; under: number; over: number };
  repair: { last: string | null };
}

async function audit(): Promise<{ audit: AuditJson; tokenizer: string }> {
  const res = await fetch(`${gw.url}/router/replicas`);
  return ((await res.json()) as { replicas: { audit: AuditJson; tokenizer: string }[] })
    .replicas[0]!;
}

test('a chat template the engine renders apart: under-predicts, tokenizer probe agreeing', async () => {
  const model = engine.servedModelName;
  const prompts = 8;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < prompts; i++) {
      await client.chat.completions.create({
        model,
        messages: [
          { role: 'system', content: system(i) },
          { role: 'user', content: `question ${round}` },
        ],
        max_tokens: 1,
      });
    }
    // The next round's repeats are predicted by the index alone.
    await new Promise((r) => setTimeout(r, DEFAULT_OVERLAY_TTL_MS + 200));
  }
  const a = await waitFor(async () => {
    const r = await audit();
    return r.audit.repair.last === 'diagnose' && r;
  }, 'the diagnosis');
  assert.equal(a.audit.verdict, 'under-predicts');
  assert.ok(a.audit.window.under >= 13, JSON.stringify(a.audit.window));
  assert.equal(a.audit.window.over, 0);
  assert.equal(a.tokenizer, 'agrees');
});
