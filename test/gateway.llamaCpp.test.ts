/**
 * The gateway in front of two fake llama-servers (support/fakeLlamaServer.ts): the engine is
 * detected from `/props`, the tokenizer probe asks `/tokenize {content}` and agrees, and each
 * replica's load is reported from its llamacpp:* metrics.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { defaultConfig } from '../src/gateway/config.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { waitFor } from './gateway.harness.ts';
import { startFakeLlama } from './support/fakeLlamaServer.ts';

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

test('two llama-servers: detected, tokenizers agree, load reported for each', async () => {
  const fakes = await Promise.all([startFakeLlama({ metrics: true }), startFakeLlama()]);
  for (const f of fakes) closers.push(() => f.close());
  const gw = await startGateway({
    ...defaultConfig(),
    port: 0,
    scrapeMs: 20,
    backends: fakes.map((f) => ({
      url: f.url,
      events: null,
      replay: null,
      model: null,
      apiKey: null,
    })),
  });
  closers.push(() => gw.close());
  const replicas = await waitFor(async () => {
    const res = await fetch(`${gw.url}/router/replicas`);
    const json = (await res.json()) as {
      replicas: { engine: string | null; tokenizer: string; reportedAtMs: number | null }[];
    };
    return (
      json.replicas.every((r) => r.tokenizer !== 'unknown' && r.reportedAtMs !== null) &&
      json.replicas
    );
  }, 'every replica detected, checked and reporting');
  assert.deepEqual(
    replicas.map((r) => [r.engine, r.tokenizer]),
    [
      ['llamacpp', 'agrees'],
      ['llamacpp', 'agrees'],
    ],
  );
});
