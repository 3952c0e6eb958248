/**
 * The gateway in front of two fake llama-servers (support/fakeLlamaServer.ts): the engine is
 * detected from `/props`, the tokenizer probe asks `/tokenize {content}` and agrees, and each
 * replica's load is reported from its llamacpp:* metrics.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { waitFor } from '../support/gateway.harness.ts';
import { startFakeLlama } from '../support/fakeLlamaServer.ts';

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

test("a prompt past a slot's n_ctx (from /props) is the gateway's 400, as vLLM words it", async () => {
  const fake = await startFakeLlama({ nCtx: 64 });
  closers.push(() => fake.close());
  const gw = await startGateway({
    ...defaultConfig(),
    port: 0,
    scrapeMs: 20,
    backends: [{ url: fake.url, events: null, replay: null, model: null, apiKey: null }],
  });
  closers.push(() => gw.close());
  await waitFor(async () => {
    const res = await fetch(`${gw.url}/router/replicas`);
    const json = (await res.json()) as { replicas: { engine: string | null; tokenizer: string }[] };
    return json.replicas.every((r) => r.engine === 'llamacpp' && r.tokenizer !== 'unknown');
  }, 'the replica detected and checked');
  const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as { data: { id: string }[] };
  const model = models.data[0]!.id;
  const post = (prompt: string) =>
    fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, prompt, max_tokens: 1 }),
    });
  const long = await post(Array.from({ length: 200 }, (_, i) => `word${i}`).join(' '));
  assert.equal(long.status, 400);
  const body = ((await long.json()) as { error: Record<string, unknown> }).error;
  assert.equal(body.type, 'BadRequestError');
  assert.equal(body.code, 400);
  assert.equal(body.param, 'prompt');
  assert.match(String(body.message), /maximum context length is 64 tokens/);
  assert.equal(fake.served.length, 0, 'the engine never saw it');
  const short = await post('a short prompt');
  assert.equal(short.status, 200);
  assert.equal(fake.served.length, 1);
});
