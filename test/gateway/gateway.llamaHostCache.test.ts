/**
 * The gateway in front of a fake llama-server (support/fakeLlamaServer.ts, 2 slots) whose host
 * prompt cache keeps the prompts that leave its slots, as upstream's `--cache-ram` does. After
 * more distinct prefixes than slots, a prompt evicted from its slot is still served from the
 * host cache: with the backend's `cache-ram-tokens` the router predicts that hit, and the engine
 * reports it cached; without it, the router predicts nothing there.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { defaultConfig } from '../../src/serving/config.ts';
import type { BackendConfig } from '../../src/serving/backendConfig.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { makeLogger } from '../../src/serving/log.ts';
import { waitFor } from '../support/gateway.harness.ts';
import { startFakeLlama } from '../support/fakeLlamaServer.ts';

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

const HOST_TOKENS = 100_000;

/** A prompt of a customer's long prefix and a short question. */
function prompt(customer: number, question: number): string {
  const words = Array.from({ length: 160 }, (_, i) => `c${customer}w${(i * 7 + customer) % 53}`);
  return `${words.join(' ')} question ${question}`;
}

type Line = Record<string, unknown> & { msg: string };

/** Sends A, B, C, then A again, one at a time: predicted and real cached tokens of each. */
async function run(backend: Partial<BackendConfig>) {
  const fake = await startFakeLlama({ slots: 2, host: { hostTokens: HOST_TOKENS } });
  closers.push(() => fake.close());
  const lines: Line[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const text of String(chunk).split('\n')) if (text) lines.push(JSON.parse(text));
      done();
    },
  });
  const gw = await startGateway(
    {
      ...defaultConfig(),
      port: 0,
      scrapeMs: 20,
      accessLog: true,
      backends: [
        { url: fake.url, events: null, replay: null, model: null, apiKey: null, ...backend },
      ],
    },
    { logger: makeLogger({ level: 'info', destination, pretty: false }) },
  );
  closers.push(() => gw.close());
  await waitFor(async () => {
    const res = await fetch(`${gw.url}/router/replicas`);
    const json = (await res.json()) as { replicas: { engine: string | null; tokenizer: string }[] };
    return json.replicas.every((r) => r.engine === 'llamacpp' && r.tokenizer !== 'unknown');
  }, 'the replica detected and checked');
  const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as { data: { id: string }[] };
  const model = models.data[0]!.id;
  const out: { predicted: number; real: number }[] = [];
  const order: [number, number][] = [
    [0, 0],
    [1, 0],
    [2, 0],
    [0, 1],
  ];
  for (const [customer, question] of order) {
    const reqId = `c${customer}-q${question}`;
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': reqId },
      body: JSON.stringify({ model, prompt: prompt(customer, question), max_tokens: 1 }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { timings: { cache_n: number } };
    const line = await waitFor(
      async () => lines.find((l) => l.msg === 'request' && l.reqId === reqId),
      `the access line of ${reqId}`,
    );
    out.push({ predicted: Number(line.cachedTokens ?? 0), real: body.timings.cache_n });
  }
  return { out, fake };
}

test('a prompt evicted from its slot but held in the host cache: predicted a hit, served cached', async () => {
  const { out, fake } = await run({ engine: 'llamacpp', cacheRamTokens: HOST_TOKENS });
  const blockSize = defaultConfig().blockSize;
  // The first three find nothing (a shared BOS at most): three prefixes, two slots.
  for (const r of out.slice(0, 3)) {
    assert.equal(r.predicted, 0);
    assert.ok(r.real < blockSize, `nothing reused: ${r.real}`);
  }
  // The fourth's prefix left its slot for the third's; the engine loads it from the host cache.
  const again = out[3]!;
  assert.ok(fake.slots.host.length > 0, 'the engine kept prompts in its host cache');
  assert.ok(again.real > 100, `the engine served it from its host cache: ${again.real}`);
  assert.ok(again.predicted > 0, 'the router predicted that hit');
  assert.ok(again.predicted <= again.real, `predicted ${again.predicted} <= real ${again.real}`);
  assert.ok(
    again.real - again.predicted < blockSize,
    `predicted ${again.predicted} is the real ${again.real} in whole blocks`,
  );
});

test('the same engine with the host cache not sized: the router predicts no hit there', async () => {
  const { out } = await run({ engine: 'llamacpp' });
  const again = out[3]!;
  assert.ok(again.real > 100, 'the engine still serves it from its host cache');
  assert.equal(again.predicted, 0, 'slots alone: its prefix is in no slot');
});
