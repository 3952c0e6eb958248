import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeChat, renderChat } from '../../src/tokenizer/chatTemplate.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { getTokenizer } from '../../src/tokenizer/tokenizer.ts';

test('cl100k_base: known ids, round trip, one shared instance', () => {
  const tok = getTokenizer();
  assert.equal(tok.name, 'cl100k_base');
  assert.equal(getTokenizer(), tok);
  assert.deepEqual(tok.encode('Hello world'), [9906, 1917]);
  const text = 'KV-cache-aware routing: 8,000 tokens, 6,000 shared. Ünïcödé ✓ 日本語';
  assert.equal(tok.decode(tok.encode(text)), text);
  assert.ok(tok.vocabSize > 100_000);
});

test('special-token strings in user text are plain text, never control', () => {
  const tok = getTokenizer();
  const ids = tok.encode('a <|endoftext|> b');
  assert.ok(ids.length > 3);
  assert.equal(tok.decode(ids), 'a <|endoftext|> b');
});

test('the chat template is Llama 3 style and prefix-stable across turns', () => {
  const tok = getTokenizer();
  const turns = [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Hi' },
  ];
  const text = renderChat(turns);
  assert.equal(
    text,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>' +
      '<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n',
  );
  const history = renderChat(turns, false);
  const longer = renderChat([...turns, { role: 'assistant', content: 'Hello.' }]);
  assert.ok(longer.startsWith(history));
  const a = encodeChat(tok, turns, false);
  const b = encodeChat(tok, [...turns, { role: 'assistant', content: 'Hello.' }]);
  assert.deepEqual(b.slice(0, a.length), a, 'token ids of the old turns are unchanged');
  assert.equal(tok.decode(encodeChat(tok, turns)), text, 'the ids spell the rendered text');
});

test("the gateway's builtin prompt tokenizer gives the engine's chat token ids", () => {
  // The engine encodes chats piece by piece (encodeChat); routing keys must use the same ids.
  const turns = [
    { role: 'system', content: 'You are helpful.' },
    { role: 'user', content: 'Hello there, how are you?' },
  ];
  const gateway = loadPromptTokenizer({ tokenizer: 'builtin', chatTemplate: null });
  assert.deepEqual(gateway.encodeChat(turns), encodeChat(getTokenizer(), turns));
  assert.deepEqual(gateway.encodePrompt('Hello world'), getTokenizer().encode('Hello world'));
});
