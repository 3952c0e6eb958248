/**
 * Real tokenizers on the command line: `kvroute engine --tokenizer DIR` answers /tokenize and
 * /detokenize with the ids the gateway computes, and unusable tokenizer flags exit 2 with one
 * line naming the flag. Gateway and engines with real tokenizers in process:
 * gateway.tokenizer.routing.test.ts.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { test } from 'node:test';
import { chatInput } from '../../src/tokenizer/chat.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { runCli, spawnEngine } from '../support/cli.ts';
import { QWEN3_DIR } from '../support/tokenizerFixtures.ts';

test('kvroute engine --tokenizer DIR answers /tokenize with the gateway ids', async () => {
  const { child, readyLine } = await spawnEngine(['--port', '0', '--tokenizer', QWEN3_DIR]);
  try {
    const url = /url=(\S+)/.exec(readyLine)?.[1];
    assert.ok(url, readyLine);
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello' },
    ];
    const res = await fetch(`${url}/tokenize`, {
      method: 'POST',
      body: JSON.stringify({ messages, chat_template_kwargs: { enable_thinking: false } }),
    });
    const json = (await res.json()) as { tokens: number[] };
    const mine = loadPromptTokenizer({ tokenizer: QWEN3_DIR, chatTemplate: null });
    assert.deepEqual(
      json.tokens,
      mine.encodeChat(chatInput(messages, { templateKwargs: { enable_thinking: false } })),
    );
    const back = await fetch(`${url}/detokenize`, {
      method: 'POST',
      body: JSON.stringify({ tokens: json.tokens }),
    });
    assert.match(
      ((await back.json()) as { prompt: string }).prompt,
      /^<\|im_start\|>system\nBe brief/,
    );
  } finally {
    child.kill('SIGTERM');
  }
  await once(child, 'exit');
});

test('unusable tokenizer flags exit 2 with one line naming the flag', () => {
  for (const [args, flag] of [
    [['engine', '--tokenizer', tmpdir()], '--tokenizer'],
    [['engine', '--chat-template', '/no/such/template'], '--chat-template'],
    [['serve', '--tokenizer', '/no/such/folder'], '--tokenizer'],
    [['serve', '--tokenize', 'sometimes'], '--tokenize'],
  ] as const) {
    const r = runCli([...args, '--port', '0']);
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(r.stderr.includes(flag), r.stderr);
  }
});
