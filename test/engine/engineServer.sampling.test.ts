/**
 * vLLM's sampling parameters through the `openai` client, against the engine and through the
 * gateway: stop strings and stop token ids, n choices (streaming and usage too), logprobs and
 * top_logprobs, echo, min_tokens, ignore_eos, seed, temperature; tool choice against the
 * server's flags; stream_options: {}.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import type { GatewayHandle } from '../../src/gateway/gateway.ts';
import { startGatewayFor } from '../support/gateway.harness.ts';
import { clientFor, startTestEngine, waitFor } from '../support/engineServerHelpers.ts';

const MODEL = 'llama-3.3-70b';
const PROMPT = 'Tell me about caches and routes.';

/** vLLM's extra request fields, which the client's types do not know. */
const vllm = <T>(params: T, extras: Record<string, unknown>): T => ({ ...params, ...extras }) as T;

/** vLLM's extra response fields. */
const stopReason = (choice: unknown) => (choice as { stop_reason?: unknown }).stop_reason;

type Completion = OpenAI.Completions.Completion;

let server: EngineServerHandle;
let client: OpenAI;

before(async () => {
  server = await startTestEngine();
  client = clientFor(server);
});
after(() => server?.close());

async function complete(extras: Record<string, unknown> = {}, maxTokens = 24): Promise<Completion> {
  return client.completions.create(
    vllm({ model: MODEL, prompt: PROMPT, max_tokens: maxTokens, seed: 3 }, extras),
  );
}

async function completeStream(
  extras: Record<string, unknown>,
  maxTokens = 24,
): Promise<OpenAI.Completions.Completion[]> {
  const stream = await client.completions.create(
    vllm({ model: MODEL, prompt: PROMPT, max_tokens: maxTokens, seed: 3, stream: true }, extras),
  );
  const chunks: Completion[] = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

/** A word the unconstrained text has at token `k` (words are one token each, space first). */
async function wordAt(k: number): Promise<{ word: string; tokenId: number; before: string }> {
  const r = await complete({ logprobs: 0 });
  const tokens = r.choices[0]!.logprobs!.tokens!;
  const word = tokens[k]!;
  // The first time the word appears must be at k, so that the stop fires there.
  assert.equal(tokens.indexOf(word), k, `pick a k whose word is new: ${tokens.join('|')}`);
  const { tokens: ids } = (await (
    await fetch(`${server.url}/tokenize`, {
      method: 'POST',
      body: JSON.stringify({ prompt: word }),
    })
  ).json()) as { tokens: number[] };
  return { word, tokenId: ids[0]!, before: tokens.slice(0, k).join('') };
}

/** The first k for which wordAt's condition holds. */
async function firstNewWord(from: number): Promise<number> {
  const tokens = (await complete({ logprobs: 0 })).choices[0]!.logprobs!.tokens!;
  for (let k = from; k < tokens.length; k++) if (tokens.indexOf(tokens[k]!) === k) return k;
  throw new Error('no new word');
}

describe('stop', () => {
  test('a stop string cuts the text before it; finish_reason stop, stop_reason the string', async () => {
    const k = await firstNewWord(3);
    const { word, before } = await wordAt(k);
    const r = await complete({ stop: [word, 'never-appears'] }, 200);
    const choice = r.choices[0]!;
    assert.equal(choice.text, before);
    assert.equal(choice.finish_reason, 'stop');
    assert.equal(stopReason(choice), word);
    // Every drawn token counts, the one that completed the stop string included.
    assert.equal(r.usage?.completion_tokens, k + 1);
    await waitFor(() => server.counters().running === 0, 30_000, 'the stopped request to free KV');

    const kept = await complete({ stop: word, include_stop_str_in_output: true }, 200);
    assert.equal(kept.choices[0]!.text, before + word);
  });

  test('streaming holds back a possible stop string and sends the same text', async () => {
    const k = await firstNewWord(4);
    const { word, before } = await wordAt(k);
    const chunks = await completeStream({ stop: [word] }, 200);
    const text = chunks.map((c) => c.choices[0]?.text ?? '').join('');
    assert.equal(text, before);
    assert.ok(chunks.every((c) => !(c.choices[0]?.text ?? '').includes(word.trim())));
    const last = chunks.at(-1)!.choices[0]!;
    assert.equal(last.finish_reason, 'stop');
    assert.equal(stopReason(last), word);
  });

  test('a stop token id ends the choice without its text; stop_reason is the id', async () => {
    const k = await firstNewWord(2);
    const { tokenId, before } = await wordAt(k);
    const r = await complete({ stop_token_ids: [tokenId] }, 200);
    assert.equal(r.choices[0]!.text, before);
    assert.equal(r.choices[0]!.finish_reason, 'stop');
    assert.equal(stopReason(r.choices[0]), tokenId);
    assert.equal(r.usage?.completion_tokens, k + 1);
  });

  test("min_tokens: no stop before it; min_tokens > max_tokens is vLLM's 400", async () => {
    const k = await firstNewWord(1);
    const { word } = await wordAt(k);
    const r = await complete({ stop: [word], min_tokens: 20 }, 40);
    assert.ok((r.usage?.completion_tokens ?? 0) >= 20, `${r.usage?.completion_tokens} tokens`);
    await assert.rejects(complete({ min_tokens: 30 }, 10), {
      status: 400,
      message: /min_tokens must be less than or equal to max_tokens=10, got 30\./,
    });
    await assert.rejects(complete({ stop: [''] }), {
      status: 400,
      message: /stop cannot contain an empty string\./,
    });
  });

  test('ignore_eos is accepted: the simulated model never samples EOS, so nothing changes', async () => {
    const plain = await complete();
    const ignoring = await complete({ ignore_eos: true });
    assert.equal(ignoring.choices[0]!.text, plain.choices[0]!.text);
    assert.equal(ignoring.usage?.completion_tokens, 24);
  });
});

describe('n, seed and temperature', () => {
  test('n choices: indexes 0..n-1, distinct, deterministic; usage counts them all', async () => {
    const r = await complete({ n: 3 });
    assert.deepEqual(
      r.choices.map((c) => c.index),
      [0, 1, 2],
    );
    assert.equal(new Set(r.choices.map((c) => c.text)).size, 3);
    assert.equal(r.usage?.completion_tokens, 3 * 24);
    const again = await complete({ n: 3 });
    assert.deepEqual(
      again.choices.map((c) => c.text),
      r.choices.map((c) => c.text),
    );
    // vLLM seeds choice i of a seeded request with seed + i.
    const seeded = await client.completions.create({
      model: MODEL,
      prompt: PROMPT,
      max_tokens: 24,
      seed: 4,
    });
    assert.equal(seeded.choices[0]!.text, r.choices[1]!.text);
  });

  test('n streaming with include_usage: every choice streams its own text', async () => {
    const whole = await complete({ n: 2 });
    const chunks = await completeStream({ n: 2, stream_options: { include_usage: true } });
    const texts = ['', ''];
    for (const c of chunks) for (const ch of c.choices) texts[ch.index] += ch.text;
    assert.deepEqual(
      texts,
      whole.choices.map((c) => c.text),
    );
    const last = chunks.at(-1)!;
    assert.deepEqual(last.choices, []);
    assert.equal(last.usage?.completion_tokens, 48);
  });

  test('chat n streaming: a role chunk per choice, then each choice its tokens', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 5,
      n: 2,
      stream: true,
      stream_options: {},
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    const roles = chunks.filter((c) => c.choices[0]?.delta.role === 'assistant');
    assert.deepEqual(
      roles.map((c) => c.choices[0]!.index),
      [0, 1],
    );
    for (const i of [0, 1]) {
      const own = chunks.filter((c) => c.choices[0]?.index === i && !c.choices[0].delta.role);
      assert.equal(own.length, 5);
      assert.equal(own.at(-1)!.choices[0]!.finish_reason, 'length');
    }
    // stream_options: {} means include_usage: true (vLLM's StreamOptions default).
    assert.equal(chunks.at(-1)!.usage?.completion_tokens, 10);
  });

  test('seed: the same seed, the same text; another seed, another text', async () => {
    const a = await complete({ seed: 11 });
    const b = await complete({ seed: 11 });
    const c = await complete({ seed: 12 });
    assert.equal(a.choices[0]!.text, b.choices[0]!.text);
    assert.notEqual(a.choices[0]!.text, c.choices[0]!.text);
  });

  test('temperature 0 is greedy: every seed gives the most likely text; n > 1 is refused', async () => {
    const a = await complete({ temperature: 0, seed: 1, logprobs: 1 });
    const b = await complete({ temperature: 0, seed: 2 });
    assert.equal(a.choices[0]!.text, b.choices[0]!.text);
    // Greedy: each chosen token is the top one of its step.
    const lp = a.choices[0]!.logprobs!;
    lp.tokens!.forEach((t, i) => {
      const top = Object.entries(lp.top_logprobs![i]!).sort((x, y) => y[1] - x[1])[0]!;
      assert.equal(top[0], t);
    });
    await assert.rejects(complete({ temperature: 0, n: 2 }), {
      status: 400,
      message: /n must be 1 when using greedy sampling, got 2\./,
    });
    await assert.rejects(complete({ temperature: -1 }), {
      status: 400,
      message: /temperature must be non-negative, got -1\./,
    });
  });
});

describe('logprobs', () => {
  test('completions: tokens, token_logprobs, top_logprobs (chosen + top N), text_offset', async () => {
    const r = await complete({ logprobs: 3 });
    const choice = r.choices[0]!;
    const lp = choice.logprobs!;
    const n = r.usage!.completion_tokens;
    assert.equal(lp.tokens!.length, n);
    assert.equal(lp.tokens!.join(''), choice.text);
    let offset = 0;
    const sizes = new Set<number>();
    lp.tokens!.forEach((token, i) => {
      assert.equal(lp.text_offset![i], offset);
      offset += token.length;
      const value = lp.token_logprobs![i]!;
      assert.ok(value < 0, `logprob ${value}`);
      const top = lp.top_logprobs![i]!;
      const entries = Object.entries(top);
      sizes.add(entries.length);
      // vLLM's dict: the chosen token, then the top 3 (the chosen one once).
      assert.equal(entries[0]![0], token);
      assert.equal(entries[0]![1], value);
      assert.ok(entries.length === 3 || entries.length === 4, `${entries.length} entries`);
      const ranked = entries.slice(1).map(([, v]) => v);
      assert.deepEqual(
        ranked,
        [...ranked].sort((x, y) => y - x),
        'top entries sorted',
      );
      // Four entries: the chosen token is below the top 3 (vLLM still lists it, first).
      if (entries.length === 4) assert.ok(value < ranked.at(-1)!, 'the chosen one is below');
    });
    assert.deepEqual([...sizes].sort(), [3, 4], 'chosen tokens both inside and outside the top 3');
    await assert.rejects(complete({ logprobs: 21 }), {
      status: 400,
      message: /Requested sample logprobs of 21, which is greater than max allowed: 20/,
    });
  });

  test('chat: content entries with token, logprob, bytes and top_logprobs', async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 12,
      logprobs: true,
      top_logprobs: 2,
    });
    const content = r.choices[0]!.logprobs!.content!;
    assert.equal(content.length, 12);
    assert.equal(content.map((c) => c.token).join(''), r.choices[0]!.message.content);
    for (const entry of content) {
      assert.ok(entry.logprob < 0);
      assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
      assert.equal(entry.top_logprobs.length, 2);
      // vLLM lists the chosen token first, then the best others.
      assert.equal(entry.top_logprobs[0]!.token, entry.token);
      assert.equal(entry.top_logprobs[0]!.logprob, entry.logprob);
    }
    const streamed = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 4,
      logprobs: true,
      stream: true,
    });
    let entries = 0;
    for await (const c of streamed) entries += c.choices[0]?.logprobs?.content?.length ?? 0;
    assert.equal(entries, 4);
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: PROMPT }],
        top_logprobs: 2,
      }),
      { status: 400, message: /when using `top_logprobs`, `logprobs` must be set to true\./ },
    );
  });
});

describe('echo', () => {
  test('completions: the prompt leads the text, and its tokens lead the logprobs', async () => {
    const plain = await complete();
    const r = await complete({ echo: true, logprobs: 1 });
    const choice = r.choices[0]!;
    assert.equal(choice.text, PROMPT + plain.choices[0]!.text);
    const lp = choice.logprobs!;
    const promptTokens = r.usage!.prompt_tokens;
    assert.equal(lp.tokens!.length, promptTokens + r.usage!.completion_tokens);
    assert.equal(lp.tokens!.join(''), choice.text);
    assert.equal(lp.token_logprobs![0], null, "the prompt's first token has no logprob");
    assert.equal(lp.top_logprobs![0], null);
    assert.ok(lp.token_logprobs!.slice(1).every((v) => v !== null && v < 0));
    const chunks = await completeStream({ echo: true });
    assert.ok(chunks[0]!.choices[0]!.text.startsWith(PROMPT));
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), choice.text);
  });

  test("chat: the last message is echoed when it is the assistant's", async () => {
    const r = await client.chat.completions.create(
      vllm(
        {
          model: MODEL,
          messages: [
            { role: 'user' as const, content: PROMPT },
            { role: 'assistant' as const, content: 'Caches are' },
          ],
          max_tokens: 3,
        },
        { echo: true },
      ),
    );
    assert.ok(r.choices[0]!.message.content!.startsWith('Caches are '));
  });
});

describe('tools', () => {
  const tools: OpenAI.ChatCompletionTool[] = [
    {
      type: 'function',
      function: { name: 'lookup', parameters: { type: 'object', properties: {} } },
    },
  ];
  const ask = (c: OpenAI, extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) =>
    c.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: PROMPT }],
      max_tokens: 3,
      tools,
      ...extra,
    });

  test('tools with tool_choice auto (the default) need --enable-auto-tool-choice', async () => {
    const message =
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set';
    await assert.rejects(ask(client), (err: InstanceType<typeof OpenAI.APIError>) => {
      assert.equal(err.status, 400);
      assert.equal(err.message, `400 ${message}`);
      assert.equal((err.error as { code?: unknown }).code, 400);
      return true;
    });
    await assert.rejects(ask(client, { tool_choice: 'required' }), {
      status: 400,
      message: /tool_choice="required" requires --tool-call-parser to be set/,
    });
    const none = await ask(client, { tool_choice: 'none' });
    assert.equal(none.choices[0]!.finish_reason, 'length');
  });

  test('with --enable-auto-tool-choice the model answers in text', async () => {
    const tooling = await startTestEngine({ enableAutoToolChoice: true, toolCallParser: 'hermes' });
    try {
      const r = await ask(clientFor(tooling));
      assert.equal(r.choices[0]!.finish_reason, 'length');
      assert.deepEqual(r.choices[0]!.message.tool_calls, []);
      assert.ok((r.choices[0]!.message.content ?? '').length > 0);
    } finally {
      await tooling.close();
    }
  });
});

describe('through the gateway', () => {
  let engine: EngineServerHandle;
  let gw: GatewayHandle;
  before(async () => {
    engine = await startTestEngine({ kvEvents: null });
    gw = await startGatewayFor([engine], { index: 'approx' });
  });
  after(async () => {
    await gw?.close();
    await engine?.close();
  });

  test("the parameters pass through untouched and give the engine's answer", async () => {
    const viaGateway = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const params = vllm(
      { model: MODEL, prompt: PROMPT, max_tokens: 16, seed: 5, n: 2, logprobs: 2, echo: true },
      { min_tokens: 2, ignore_eos: true, stop: ['zzz'] },
    );
    const direct = await clientFor(engine).completions.create(params);
    const routed = await viaGateway.completions.create(params);
    assert.deepEqual(
      routed.choices.map((c) => [c.index, c.text, c.logprobs?.tokens]),
      direct.choices.map((c) => [c.index, c.text, c.logprobs?.tokens]),
    );
    await assert.rejects(
      viaGateway.completions.create(vllm({ model: MODEL, prompt: PROMPT }, { min_tokens: -1 })),
      { status: 400, message: /min_tokens must be greater than or equal to 0, got -1\./ },
    );
  });
});
