/**
 * What a chat template gets from a request, as vLLM builds it: messages (text parts, tool calls
 * with parsed arguments, reasoning, tool_call_id, name), tools as vLLM dumps them, the rendering
 * options and their defaults and refusals; and the engine's /tokenize and /detokenize shapes.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { parseChatMessages } from '../../src/openai/chatMessages.ts';
import { ApiError } from '../../src/openai/errors.ts';
import { completionAddSpecialTokens, readChatInput } from '../../src/openai/templateFields.ts';
import { startEngine } from '../support/gateway.harness.ts';

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 400);
    return err;
  }
  assert.fail('expected a 400');
}

describe('messages as vLLM hands them to the template', () => {
  test('text parts join with newlines; null content is empty; other parts are refused', () => {
    const [m] = parseChatMessages([
      {
        role: 'user',
        content: ['one', { type: 'text', text: 'two' }, { type: 'text', text: null }],
      },
    ]);
    assert.deepEqual(m, { role: 'user', content: 'one\ntwo' });
    assert.deepEqual(parseChatMessages([{ role: 'assistant', content: null }]), [
      { role: 'assistant', content: '' },
    ]);
    const err = refusal(() =>
      parseChatMessages([
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] },
      ]),
    );
    assert.match(err.message, /content\[0\] must be a text part/);
    // A type that names a member of Object's prototype is no text part either.
    for (const type of ['constructor', 'toString', '__proto__']) {
      const refused = refusal(() => parseChatMessages([{ role: 'user', content: [{ type }] }]));
      assert.match(refused.message, /content\[0\] must be a text part/, type);
    }
  });

  test('tool calls: arguments parsed (bad JSON -> {}), empty lists dropped; tool ids and names kept', () => {
    const messages = parseChatMessages([
      {
        role: 'assistant',
        content: null,
        reasoning: 'think first',
        tool_calls: [
          { id: 'a', type: 'function', function: { name: 'f', arguments: '{"x": 1}' } },
          { id: 'b', type: 'function', function: { name: 'g', arguments: 'not json' } },
        ],
      },
      { role: 'assistant', content: 'plain', tool_calls: [] },
      { role: 'tool', tool_call_id: 'a', content: '42', name: 'f' },
    ]);
    assert.deepEqual(messages[0], {
      role: 'assistant',
      content: '',
      reasoning: 'think first',
      reasoning_content: 'think first',
      tool_calls: [
        { id: 'a', type: 'function', function: { name: 'f', arguments: { x: 1 } } },
        { id: 'b', type: 'function', function: { name: 'g', arguments: {} } },
      ],
    });
    assert.deepEqual(messages[1], { role: 'assistant', content: 'plain' });
    assert.deepEqual(messages[2], { role: 'tool', content: '42', tool_call_id: 'a', name: 'f' });
  });
});

describe('rendering options', () => {
  const messages = [{ role: 'user', content: 'hi' }];

  test("vLLM's defaults: generation prompt on, special tokens off for chats, on for completions", () => {
    const chat = readChatInput({ messages });
    assert.equal(chat.addGenerationPrompt, true);
    assert.equal(chat.continueFinalMessage, false);
    assert.equal(chat.addSpecialTokens, false);
    assert.equal(chat.tools, null);
    assert.deepEqual(chat.templateKwargs, {});
    assert.equal(completionAddSpecialTokens({}), true);
    assert.equal(completionAddSpecialTokens({ add_special_tokens: false }), false);
  });

  test('kwargs pass through; reasoning_effort joins them', () => {
    const chat = readChatInput({
      messages,
      chat_template_kwargs: { enable_thinking: false },
      reasoning_effort: 'low',
    });
    assert.deepEqual(chat.templateKwargs, { enable_thinking: false, reasoning_effort: 'low' });
  });

  test('tools as vLLM dumps them: declared fields first, unset ones null, extras kept', () => {
    const chat = readChatInput({
      messages,
      tools: [{ function: { name: 'f', strict: true }, type: 'function' }],
    });
    assert.deepEqual(chat.tools, [
      {
        type: 'function',
        function: { name: 'f', description: null, parameters: null, strict: true },
      },
    ]);
    assert.deepEqual(Object.keys(chat.tools![0]!.function as object), [
      'name',
      'description',
      'parameters',
      'strict',
    ]);
    refusal(() => readChatInput({ messages, tools: [{ type: 'function' }] }));
  });

  test("refusals with vLLM's messages", () => {
    assert.equal(
      refusal(() =>
        readChatInput({ messages, add_generation_prompt: true, continue_final_message: true }),
      ).message,
      'Cannot set both `continue_final_message` and `add_generation_prompt` to True.',
    );
    // Only when both are sent: continue_final_message alone turns the generation prompt off.
    assert.equal(
      readChatInput({ messages, continue_final_message: true }).continueFinalMessage,
      true,
    );
    for (const body of [
      { messages, chat_template: '{{ messages }}' },
      { messages, chat_template_kwargs: { chat_template: '{{ messages }}' } },
    ]) {
      assert.match(refusal(() => readChatInput(body)).message, /untrusted chat template/);
    }
    refusal(() => readChatInput({ messages, chat_template_kwargs: [] }));
  });
});

describe("the engine's /tokenize and /detokenize", async () => {
  const engine = await startEngine({ kvEvents: null, kvReplay: null });
  after(() => engine.close());
  const post = async (path: string, body: object) => {
    const res = await fetch(`${engine.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  test("vLLM's response shape, token_strs on request", async () => {
    const { status, json } = await post('/tokenize', { prompt: 'Hello world' });
    assert.equal(status, 200);
    assert.deepEqual(Object.keys(json), ['count', 'max_model_len', 'tokens', 'token_strs']);
    assert.deepEqual(json.tokens, [9906, 1917]);
    assert.equal(json.token_strs, null);
    const strs = await post('/tokenize', { prompt: 'Hello world', return_token_strs: true });
    assert.deepEqual(strs.json.token_strs, ['Hello', '\u0120world']);
  });

  test('chats: add_generation_prompt and continue_final_message change the ids', async () => {
    const messages = [{ role: 'user', content: 'Hi' }];
    const withPrompt = (await post('/tokenize', { messages })).json.tokens as number[];
    const without = (await post('/tokenize', { messages, add_generation_prompt: false })).json
      .tokens as number[];
    assert.ok(without.length < withPrompt.length);
    assert.deepEqual(withPrompt.slice(0, without.length), without);
    const open = (await post('/tokenize', { messages, continue_final_message: true })).json
      .tokens as number[];
    assert.ok(open.length < without.length);
  });

  test('detokenize round trip; bad ids and unknown models refused', async () => {
    const { json } = await post('/tokenize', { prompt: 'round trip ✓' });
    const back = await post('/detokenize', { tokens: json.tokens });
    assert.deepEqual(back.json, { prompt: 'round trip ✓' });
    assert.equal((await post('/detokenize', { tokens: [-1] })).status, 400);
    assert.equal((await post('/tokenize', { model: 'nope', prompt: 'x' })).status, 404);
    assert.equal((await post('/tokenize', {})).status, 400);
  });
});
