/**
 * The tiny model in llama.cpp itself (node-llama-cpp's CPU build, no GPU, no build): it loads
 * with no warning, tokenizes exactly as the gateway's Hugging Face tokenizer on the tokenizer
 * fixtures (Llama 3 and Qwen3), carries its chat template, and computes: one greedy token from a
 * finite next-token distribution.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  getLlama,
  type Llama,
  LlamaLogLevel,
  type LlamaModel,
  readGgufFileInfo,
  type Token,
} from 'node-llama-cpp';
import { writeTinyModel } from '../../src/gguf/tinyModel.ts';
import { chatInput } from '../../src/tokenizer/chat.ts';
import { HfTokenizer } from '../../src/tokenizer/hfTokenizer.ts';
import { loadModelFolder } from '../../src/tokenizer/modelFolder.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { tinyModelPath } from '../support/tinyModel.ts';
import { writeTinyTokenizerFolder } from '../support/tinyTokenizer.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../support/tokenizerFixtures.ts';

const require = createRequire(import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'kvroute-gguf-llama-'));

/** The strings test/tokenizer/tokenizer.hf.test.ts stresses pre-tokenizers with, and prose in chunks. */
const PIECES = [
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
  '日本語',
  '🎉👩‍👩‍👧',
  'a'.repeat(70),
  ' '.repeat(40),
];

function fixtureTexts(): string[] {
  const prose = readFileSync(require.resolve('typescript/ThirdPartyNoticeText.txt'), 'utf8');
  const chunks: string[] = [];
  for (let at = 0; at < prose.length && chunks.length < 40; at += 1500)
    chunks.push(prose.slice(at, at + 1500));
  const random = fc.sample(
    fc
      .array(fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.constantFrom(...PIECES)), {
        maxLength: 24,
      })
      .map((parts) => parts.join('')),
    { seed: 27, numRuns: 150 },
  );
  return [
    'Hello world! The quick brown fox jumps over the lazy dog.',
    PIECES.join(''),
    ...PIECES,
    'x'.repeat(3000),
    `${'ab'.repeat(1500)} tail`,
    '\n'.repeat(500),
    ...chunks,
    ...random,
  ];
}

let llama: Llama;
const warnings: string[] = [];
const models: LlamaModel[] = [];

before(async () => {
  llama = await getLlama({
    build: 'never',
    gpu: false,
    logLevel: LlamaLogLevel.warn,
    logger: (level, message) => {
      if (
        level === LlamaLogLevel.warn ||
        level === LlamaLogLevel.error ||
        level === LlamaLogLevel.fatal
      ) {
        warnings.push(`${level}: ${message}`);
      }
    },
  });
});

after(async () => {
  for (const model of models) await model.dispose();
  await llama?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

async function load(path: string): Promise<LlamaModel> {
  const model = await llama.loadModel({ modelPath: path });
  models.push(model);
  return model;
}

describe('the default tiny model (Llama 3 tokenizer) in llama.cpp', () => {
  let path: string;
  let model: LlamaModel;
  before(async () => {
    path = await tinyModelPath();
    model = await load(path);
  });

  test('loads with no warning', () => {
    assert.deepEqual(warnings, []);
    assert.equal(
      model.fileInfo.tensorInfo?.some((t) => t.name === 'output.weight'),
      false,
    );
  });

  test('tokenize(text, true) = the gateway tokenizer without special tokens, on the fixtures', () => {
    const hf = loadModelFolder(LLAMA3_DIR).tokenizer;
    const texts = fixtureTexts();
    let tokens = 0;
    for (const text of texts) {
      const expected = hf.encode(text, false);
      assert.deepEqual(
        Array.from(model.tokenize(text, true)),
        expected,
        JSON.stringify(text.slice(0, 80)),
      );
      tokens += expected.length;
    }
    assert.ok(tokens > 5000, `${tokens} tokens compared`);
  });

  test("the rendered chat template gives Llama 3's known ids", () => {
    const prompts = loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null });
    const text = prompts.renderChat(chatInput([{ role: 'user', content: 'Hello' }]));
    assert.deepEqual(
      Array.from(model.tokenize(text, true)),
      [128000, 128006, 882, 128007, 271, 9906, 128009, 128006, 78191, 128007, 271],
    );
  });

  test("the file carries the folder's chat template, vocabulary, merges and special ids", async () => {
    const info = await readGgufFileInfo(path, { logWarnings: false });
    const config = JSON.parse(readFileSync(join(LLAMA3_DIR, 'tokenizer_config.json'), 'utf8'));
    const t = info.metadata.tokenizer;
    assert.equal(t.chat_template, config.chat_template);
    assert.equal(t.ggml.pre, 'llama-bpe');
    assert.equal(t.ggml.tokens.length, 128_256);
    assert.equal(t.ggml.merges?.length, 280_147);
    assert.equal(t.ggml.bos_token_id, 128_000);
    assert.equal(t.ggml.eos_token_id, 128_001);
    assert.equal(t.ggml.token_type[128_009], 3);
    assert.equal(t.ggml.token_type[9906], 1);
    // This tokenizer.json has no BOS step, and the file says so.
    assert.equal(t.ggml.add_bos_token, false);
    assert.equal(model.tokens.bos, 128_000);
    assert.equal(model.tokens.eos, 128_001);
  });

  test('one greedy token from a finite next-token distribution', async () => {
    const context = await model.createContext({
      contextSize: 256,
      batchSize: 64,
      threads: 1,
      sequences: 2,
    });
    try {
      const prompt = [128000 as Token, ...model.tokenize('The cache holds the prefix', true)];
      const sequence = context.getSequence();
      const last = prompt.length - 1;
      const out = await sequence.controlledEvaluate([
        ...prompt.slice(0, last),
        [prompt[last]!, { generateNext: { probabilities: true } }],
      ]);
      const probabilities = out[last]!.next!.probabilities!;
      let sum = 0;
      let best = -1;
      let bestP = -1;
      for (const [token, p] of probabilities) {
        assert.ok(Number.isFinite(p) && p >= 0);
        sum += p;
        if (p > bestP) [best, bestP] = [token, p];
      }
      assert.ok(Math.abs(sum - 1) < 1e-3, `probabilities sum to ${sum}`);
      assert.ok(bestP < 1 && bestP > 1 / 128_256, 'random weights: a spread, not a point');

      const greedy = context.getSequence();
      const iterator = greedy.evaluate(prompt, { temperature: 0 });
      const first = await iterator.next();
      await iterator.return();
      assert.equal(first.value, best, 'greedy picks the most probable token');
      assert.ok(Number.isInteger(first.value) && first.value! >= 0 && first.value! < 128_256);
    } finally {
      await context.dispose();
    }
  });
});

describe('a Qwen3 tokenizer folder (pre-tokenizer qwen2)', () => {
  test('tokenize(text, true) = the gateway tokenizer on NFC text', async () => {
    const { path } = await writeTinyModel({
      out: join(dir, 'qwen3.gguf'),
      tokenizer: QWEN3_DIR,
      layers: 1,
      dim: 64,
      ffn: 128,
    });
    const model = await load(path);
    // Qwen's own GGUF files warn the same (llama.cpp issue 23183): '</s>' is a plain vocabulary
    // token there, and llama.cpp retypes it as control because its text is an end-of-turn name.
    assert.deepEqual(
      warnings.map((w) => w.replace(/\s+/g, ' ')),
      [
        "warn: load: control-looking token: 128247 '</s>' was not control-type; this is probably a bug in the model. its type will be overridden",
      ],
    );
    const hf = loadModelFolder(QWEN3_DIR).tokenizer;
    for (const text of fixtureTexts().map((t) => t.normalize('NFC'))) {
      assert.deepEqual(
        Array.from(model.tokenize(text, true)),
        hf.encode(text, false),
        JSON.stringify(text.slice(0, 80)),
      );
    }
    const info = await readGgufFileInfo(path, { logWarnings: false });
    assert.equal(info.metadata.tokenizer.ggml.pre, 'qwen2');
    assert.equal(model.tokens.eos, hf.encode('<|im_end|>')[0]);
  });
});

describe('small byte-level folders (pre-tokenizers llama-bpe and gpt-2)', () => {
  test('load with no warning and tokenize as the gateway tokenizer', async () => {
    for (const pre of ['llama3', 'gpt2'] as const) {
      const folder = writeTinyTokenizerFolder(join(dir, `tok-${pre}`), { bosStep: true, pre });
      const { path } = await writeTinyModel({
        out: join(dir, `tiny-${pre}.gguf`),
        tokenizer: folder,
        layers: 1,
        dim: 64,
        ffn: 128,
        contextTokens: 512,
      });
      const before = warnings.length;
      const model = await load(path);
      assert.deepEqual(warnings.slice(before), [], pre);
      const info = await readGgufFileInfo(path, { logWarnings: false });
      assert.equal(info.metadata.tokenizer.ggml.pre, pre === 'gpt2' ? 'gpt-2' : 'llama-bpe');
      const hf = new HfTokenizer(
        JSON.parse(readFileSync(join(folder, 'tokenizer.json'), 'utf8')),
        JSON.parse(readFileSync(join(folder, 'tokenizer_config.json'), 'utf8')),
      );
      for (const text of [...fixtureTexts(), 'hello world, the llama model and the token cache']) {
        assert.deepEqual(
          Array.from(model.tokenize(text, true)),
          hf.encode(text, false),
          `${pre}: ${JSON.stringify(text.slice(0, 60))}`,
        );
      }
    }
  });

  test('other shapes (MHA, MQA, more layers) load and compute a token', async () => {
    const folder = writeTinyTokenizerFolder(join(dir, 'tok-shapes'), { bosStep: false });
    const shapes = [
      { layers: 1, dim: 64, heads: 8, kvHeads: 8, ffn: 96 },
      { layers: 3, dim: 96, heads: 4, kvHeads: 1, ffn: 160 },
    ];
    for (const [i, shape] of shapes.entries()) {
      const { path } = await writeTinyModel({
        ...shape,
        contextTokens: 256,
        out: join(dir, `shape-${i}.gguf`),
        tokenizer: folder,
        seed: i,
      });
      const before = warnings.length;
      const model = await load(path);
      assert.deepEqual(warnings.slice(before), [], JSON.stringify(shape));
      const context = await model.createContext({ contextSize: 256, batchSize: 32, threads: 1 });
      try {
        const iterator = context.getSequence().evaluate(model.tokenize('hello the world', true), {
          temperature: 0,
        });
        const first = await iterator.next();
        await iterator.return();
        const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
        assert.ok(Number.isInteger(first.value) && first.value! >= 0 && first.value! < vocab);
      } finally {
        await context.dispose();
      }
    }
  });
});
