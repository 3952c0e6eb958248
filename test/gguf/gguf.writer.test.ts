/**
 * The GGUF writer against upstream's reader: node-llama-cpp's own GGUF parser
 * (`readGgufFileInfo`) decodes what kvroute encodes, every value type and every tensor offset.
 * Half precision against IEEE 754's bit patterns; the same seed gives the same bytes and another
 * seed other weights (a small tokenizer folder and small shapes, so it is fast).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { GgmlType as UpstreamGgmlType, readGgufFileInfo } from 'node-llama-cpp';
import { f16Bits, toF16 } from '../../src/gguf/f16.ts';
import { encodeGgufHeader, tensorLayout } from '../../src/gguf/ggufHeader.ts';
import {
  bool,
  f32,
  GgmlType,
  type GgufKv,
  i32s,
  str,
  strings,
  u32,
} from '../../src/gguf/ggufFormat.ts';
import { normalQuantile, normalQuantiles } from '../../src/gguf/normalTable.ts';
import { shapeProblem } from '../../src/gguf/tinyLlama.ts';
import { DEFAULT_SHAPE, writeTinyModel } from '../../src/gguf/tinyModel.ts';
import { HfTokenizer } from '../../src/tokenizer/hfTokenizer.ts';
import {
  TINY_SPECIALS,
  TINY_TEMPLATE,
  writeTinyTokenizerFolder,
} from '../support/tinyTokenizer.ts';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-gguf-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const SMALL = { layers: 2, dim: 64, heads: 4, kvHeads: 2, ffn: 128, contextTokens: 512 };
const tinyFolder = writeTinyTokenizerFolder(join(dir, 'tok'), { bosStep: false });
const bosFolder = writeTinyTokenizerFolder(join(dir, 'tok-bos'), { bosStep: true });

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** A half's value, by IEEE 754's definition. */
function halfValue(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  if (exp === 0) return sign * mant * 2 ** -24;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

const bitsOf = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0]!;

describe('half precision', () => {
  test('IEEE 754 bit patterns, ties to even, subnormals, overflow, NaN', () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [0.5, 0x3800],
      [65504, 0x7bff],
      [65520, 0x7c00], // halfway to 65536: rounds to even, which overflows to infinity
      [1e6, 0x7c00],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // halfway to it: ties to even (0)
      [1.5 * 2 ** -24, 0x0002], // halfway between 1 and 2 subnormal steps: to even (2)
      [1 + 2 ** -11, 0x3c00], // halfway between 1 and the next half: to even
      [1 + 3 * 2 ** -11, 0x3c02],
      [Number.POSITIVE_INFINITY, 0x7c00],
      [Number.NEGATIVE_INFINITY, 0xfc00],
    ];
    for (const [x, bits] of cases) assert.equal(f16Bits(bitsOf(x)), bits, `f16(${x})`);
    assert.equal(f16Bits(bitsOf(Number.NaN)) & 0x7c00, 0x7c00);
    assert.notEqual(f16Bits(bitsOf(Number.NaN)) & 0x3ff, 0);
  });

  test('each float32 goes to the nearest half (property)', () => {
    fc.assert(
      fc.property(fc.float({ min: -65000, max: 65000, noNaN: true }), (x) => {
        const h = f16Bits(bitsOf(x));
        const v = halfValue(h);
        for (const neighbour of [h - 1, h + 1]) {
          if ((neighbour & 0x7fff) > 0x7bff || neighbour < 0) continue;
          const w = halfValue(neighbour);
          if (Math.sign(w) === Math.sign(v) || w === 0) {
            assert.ok(Math.abs(x - v) <= Math.abs(x - w), `${x}: ${v} vs ${w}`);
          }
        }
      }),
      { seed: 27, numRuns: 2000 },
    );
  });

  test('the array form equals the scalar form', () => {
    const src = new Float32Array([0.1, -0.02, 2.5e3, 1e-7, -65504]);
    const dst = new Uint16Array(src.length);
    toF16(src, dst);
    assert.deepEqual(
      Array.from(dst),
      Array.from(src, (x) => f16Bits(bitsOf(x))),
    );
  });
});

describe('normal quantiles', () => {
  test('known quantiles of N(0, 1); the table has mean 0 and variance 1', () => {
    assert.ok(Math.abs(normalQuantile(0.975) - 1.959963985) < 1e-8);
    assert.ok(Math.abs(normalQuantile(0.5)) < 1e-12);
    assert.ok(Math.abs(normalQuantile(0.001) + 3.090232306) < 1e-8);
    const z = normalQuantiles();
    let sum = 0;
    let squares = 0;
    for (const v of z) {
      sum += v;
      squares += v * v;
    }
    assert.ok(Math.abs(sum / z.length) < 1e-9);
    assert.ok(Math.abs(squares / z.length - 1) < 1e-3, `variance ${squares / z.length}`);
    for (let k = 1; k < z.length; k++) assert.ok(z[k]! > z[k - 1]!);
  });
});

describe('GGUF header', () => {
  test("upstream's parser reads every value type and the tensor offsets", async () => {
    const kvs: GgufKv[] = [
      ['general.architecture', str('llama')],
      ['general.alignment', u32(32)],
      ['test.count', u32(4_000_000_000)],
      ['test.eps', f32(1e-5)],
      ['test.flag', bool(true)],
      ['test.name', str('ünïcödé ✓')],
      ['test.words', strings(['a', 'Ġb', '', '日本'])],
      ['test.types', i32s(new Int32Array([1, 3, -7]))],
    ];
    const tensors = [
      { name: 'a', dims: [3], type: GgmlType.F32 }, // 12 bytes: the next starts at 32
      { name: 'b', dims: [5, 2], type: GgmlType.F16 },
    ];
    const { placements, dataBytes } = tensorLayout(tensors, 32);
    assert.deepEqual(
      placements.map((p) => p.offsetBytes),
      [0, 32],
    );
    assert.equal(dataBytes, 64);
    const header = encodeGgufHeader(kvs, placements, 32);
    assert.equal(header.length % 32, 0);
    assert.equal(header.subarray(0, 4).toString('latin1'), 'GGUF');
    assert.equal(header.readUInt32LE(4), 3);
    assert.equal(header.readBigUInt64LE(8), 2n);
    assert.equal(header.readBigUInt64LE(16), BigInt(kvs.length));
    const path = join(dir, 'header.gguf');
    writeFileSync(path, Buffer.concat([header, Buffer.alloc(dataBytes)]));

    const info = await readGgufFileInfo(path, { logWarnings: false });
    assert.equal(info.version, 3);
    assert.equal(info.infoEndOffset, header.length);
    const meta = info.metadata as unknown as Record<string, Record<string, unknown>>;
    assert.equal(meta.general!.architecture, 'llama');
    assert.equal(meta.test!.count, 4_000_000_000);
    assert.equal(meta.test!.eps, Math.fround(1e-5));
    assert.equal(meta.test!.flag, true);
    assert.equal(meta.test!.name, 'ünïcödé ✓');
    assert.deepEqual(meta.test!.words, ['a', 'Ġb', '', '日本']);
    assert.deepEqual(meta.test!.types, [1, 3, -7]);
    const read = info.tensorInfo!.map((t) => ({
      name: t.name,
      dims: t.dimensions.map(Number),
      type: t.ggmlType,
      offset: Number(t.offset),
    }));
    assert.deepEqual(read, [
      { name: 'a', dims: [3], type: UpstreamGgmlType.F32, offset: 0 },
      { name: 'b', dims: [5, 2], type: UpstreamGgmlType.F16, offset: 32 },
    ]);
  });
});

describe('writeTinyModel', () => {
  test('the same seed gives the same bytes; another seed other weights, the same header', async () => {
    const a = await writeTinyModel({
      ...SMALL,
      out: join(dir, 'a.gguf'),
      tokenizer: tinyFolder,
      seed: 7,
    });
    const b = await writeTinyModel({
      ...SMALL,
      out: join(dir, 'b.gguf'),
      tokenizer: tinyFolder,
      seed: 7,
    });
    const c = await writeTinyModel({
      ...SMALL,
      out: join(dir, 'c.gguf'),
      tokenizer: tinyFolder,
      seed: 8,
    });
    assert.equal(statSync(a.path).size, a.bytes);
    assert.equal(sha(a.path), sha(b.path));
    assert.notEqual(sha(a.path), sha(c.path));
    const info = await readGgufFileInfo(a.path, { logWarnings: false });
    const headerBytes = info.infoEndOffset!;
    const [bytesA, bytesC] = [readFileSync(a.path), readFileSync(c.path)];
    assert.ok(bytesA.subarray(0, headerBytes).equals(bytesC.subarray(0, headerBytes)));
    assert.equal(bytesA.length, bytesC.length);
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      [],
      'no temporary file is left',
    );
  });

  test('any valid shape: every tensor aligned, in order, inside the file (property)', async () => {
    const shapes = fc
      .record({
        layers: fc.integer({ min: 1, max: 3 }),
        kvHeads: fc.integer({ min: 1, max: 3 }),
        group: fc.integer({ min: 1, max: 3 }),
        headDim: fc.integer({ min: 1, max: 12 }).map((n) => 2 * n),
        ffn: fc.integer({ min: 1, max: 100 }),
        seed: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
      })
      .map(({ kvHeads, group, headDim, ...rest }) => ({
        ...rest,
        kvHeads,
        heads: kvHeads * group,
        dim: kvHeads * group * headDim,
      }));
    await fc.assert(
      fc.asyncProperty(shapes, async (shape) => {
        const out = join(dir, 'prop.gguf');
        const { bytes } = await writeTinyModel({
          ...shape,
          contextTokens: 64,
          out,
          tokenizer: tinyFolder,
        });
        assert.equal(statSync(out).size, bytes);
        const info = await readGgufFileInfo(out, { logWarnings: false });
        assert.equal(info.tensorInfo!.length, 2 + 9 * shape.layers);
        let end = info.infoEndOffset!;
        for (const t of info.tensorInfo!) {
          assert.equal(Number(t.offset) % 32, 0);
          assert.ok(Number(t.fileOffset) >= end, `${t.name} after the one before`);
          const size =
            t.dimensions.map(Number).reduce((x, y) => x * y, 1) *
            (t.ggmlType === UpstreamGgmlType.F16 ? 2 : 4);
          end = Number(t.fileOffset) + size;
        }
        assert.ok(
          end <= bytes && bytes - end < 32,
          'the data ends the file, padded to the alignment',
        );
      }),
      { seed: 27, numRuns: 15 },
    );
  });

  test('tensors: names, shapes (ne0 first), types, aligned offsets; no output.weight', async () => {
    const { path, bytes } = await writeTinyModel({
      ...SMALL,
      out: join(dir, 't.gguf'),
      tokenizer: tinyFolder,
    });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    const vocab = (info.metadata.tokenizer.ggml.tokens as readonly string[]).length;
    const tensors = new Map(info.tensorInfo!.map((t) => [t.name, t]));
    assert.equal(tensors.size, 2 + 9 * SMALL.layers);
    assert.equal(tensors.has('output.weight'), false);
    const shape = (name: string) => tensors.get(name)!.dimensions.map(Number);
    assert.deepEqual(shape('token_embd.weight'), [64, vocab]);
    assert.deepEqual(shape('blk.1.attn_q.weight'), [64, 64]);
    assert.deepEqual(shape('blk.1.attn_k.weight'), [64, 32]);
    assert.deepEqual(shape('blk.1.attn_v.weight'), [64, 32]);
    assert.deepEqual(shape('blk.1.ffn_gate.weight'), [64, 128]);
    assert.deepEqual(shape('blk.1.ffn_down.weight'), [128, 64]);
    assert.deepEqual(shape('output_norm.weight'), [64]);
    assert.equal(tensors.get('blk.0.attn_norm.weight')!.ggmlType, UpstreamGgmlType.F32);
    assert.equal(tensors.get('blk.0.ffn_up.weight')!.ggmlType, UpstreamGgmlType.F16);
    let end = 0;
    for (const t of info.tensorInfo!) {
      assert.equal(Number(t.offset) % 32, 0, t.name);
      const elements = t.dimensions.map(Number).reduce((x, y) => x * y, 1);
      end = Math.max(
        end,
        Number(t.fileOffset) + elements * (t.ggmlType === UpstreamGgmlType.F16 ? 2 : 4),
      );
    }
    assert.ok(end <= bytes);
    const file = readFileSync(path);
    const norm = tensors.get('output_norm.weight')!;
    const normValues = new Float32Array(
      file.buffer.slice(Number(norm.fileOffset), Number(norm.fileOffset) + 64 * 4),
    );
    assert.deepEqual(Array.from(normValues), new Array(64).fill(1));
    const q = tensors.get('blk.0.attn_q.weight')!;
    const halves = new Uint16Array(
      file.buffer.slice(Number(q.fileOffset), Number(q.fileOffset) + 64 * 64 * 2),
    );
    const values = Array.from(halves, halfValue);
    const std = Math.sqrt(values.reduce((s, v) => s + v * v, 0) / values.length);
    assert.ok(values.every(Number.isFinite));
    assert.ok(Math.abs(std - 0.02) < 0.002, `std ${std}`);
  });

  test('llama.* metadata from the shape', async () => {
    const { path } = await writeTinyModel({
      ...SMALL,
      out: join(dir, 'm.gguf'),
      tokenizer: tinyFolder,
    });
    const info = await readGgufFileInfo(path, { logWarnings: false });
    assert.equal(info.metadata.general.architecture, 'llama');
    const llama = info.architectureMetadata;
    assert.equal(llama.context_length, 512);
    assert.equal(llama.embedding_length, 64);
    assert.equal(llama.block_count, 2);
    assert.equal(llama.feed_forward_length, 128);
    assert.equal(llama.attention?.head_count, 4);
    assert.equal(llama.attention?.head_count_kv, 2);
    assert.equal(llama.rope?.dimension_count, 16);
    assert.equal(llama.rope?.freq_base, 500000);
  });

  test("tokenizer.*: the folder's tokens, types, merges, specials, BOS rule and chat template", async () => {
    for (const [folder, bosStep] of [
      [tinyFolder, false],
      [bosFolder, true],
    ] as const) {
      const { path } = await writeTinyModel({
        ...SMALL,
        out: join(dir, 'k.gguf'),
        tokenizer: folder,
      });
      const info = await readGgufFileInfo(path, { logWarnings: false });
      const t = info.metadata.tokenizer;
      const json = JSON.parse(readFileSync(join(folder, 'tokenizer.json'), 'utf8'));
      const config = JSON.parse(readFileSync(join(folder, 'tokenizer_config.json'), 'utf8'));
      const hf = new HfTokenizer(json, config);
      assert.equal(t.ggml.model, 'gpt2');
      assert.equal(t.ggml.pre, 'llama-bpe');
      const specialIds = TINY_SPECIALS.map((s) => hf.encode(s)[0]!);
      assert.equal(t.ggml.tokens.length, specialIds.at(-1)! + 1);
      for (const [text, id] of Object.entries(json.model.vocab as Record<string, number>)) {
        assert.equal(t.ggml.tokens[id], text);
        assert.equal(t.ggml.token_type[id], 1);
      }
      for (const [i, id] of specialIds.entries()) {
        assert.equal(t.ggml.tokens[id], TINY_SPECIALS[i]);
        assert.equal(t.ggml.token_type[id], 3);
      }
      assert.deepEqual(
        t.ggml.merges,
        (json.model.merges as [string, string][]).map((m) => m.join(' ')),
      );
      assert.equal(t.ggml.bos_token_id, specialIds[0]);
      assert.equal(t.ggml.eos_token_id, specialIds[1]);
      assert.equal(t.chat_template, TINY_TEMPLATE);
      // The gateway's tokenizer decides: does encoding with special tokens put BOS first?
      assert.equal(hf.encode('hello', true)[0] === specialIds[0], bosStep);
      assert.equal(t.ggml.add_bos_token, bosStep);
      assert.equal(t.ggml.add_eos_token, false);
    }
  });

  test('added tokens: special or special-looking are control, others user-defined; holes are unused', async () => {
    const folder = writeTinyTokenizerFolder(join(dir, 'tok-added'), { bosStep: false });
    const json = JSON.parse(readFileSync(join(folder, 'tokenizer.json'), 'utf8'));
    const next = Math.max(...json.added_tokens.map((t: { id: number }) => t.id)) + 1;
    const plain = {
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: false,
    };
    json.added_tokens.push(
      { ...plain, id: next, content: '<|fim_prefix|>' },
      { ...plain, id: next + 1, content: '<tool_call>' },
      { ...plain, id: next + 3, content: '<unused7>' },
    );
    writeFileSync(join(folder, 'tokenizer.json'), JSON.stringify(json));
    const { path } = await writeTinyModel({
      ...SMALL,
      out: join(dir, 'added.gguf'),
      tokenizer: folder,
    });
    const t = (await readGgufFileInfo(path, { logWarnings: false })).metadata.tokenizer.ggml;
    assert.equal(t.tokens.length, next + 4);
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => [t.tokens[next + i], t.token_type[next + i]]),
      [
        ['<|fim_prefix|>', 3],
        ['<tool_call>', 4],
        [`[PAD${next + 2}]`, 5],
        ['<unused7>', 3],
      ],
    );
  });

  test('a shape llama.cpp cannot run, and a tokenizer it cannot name, are refused before any file', async () => {
    assert.equal(shapeProblem(DEFAULT_SHAPE), null);
    assert.match(
      shapeProblem({ ...DEFAULT_SHAPE, dim: 250 })!,
      /--dim 250 must be a multiple of --heads 4/,
    );
    assert.match(
      shapeProblem({ ...DEFAULT_SHAPE, heads: 8, kvHeads: 3 })!,
      /--heads 8 .* --kv-heads 3/,
    );
    assert.match(
      shapeProblem({ ...DEFAULT_SHAPE, dim: 12, heads: 4 })!,
      /head width, 3\) must be even/,
    );
    assert.match(
      shapeProblem({ ...DEFAULT_SHAPE, layers: 0 })!,
      /--layers must be a positive integer/,
    );
    const out = join(dir, 'refused.gguf');
    await assert.rejects(writeTinyModel({ ...SMALL, dim: 250, out, tokenizer: tinyFolder }), {
      code: 'ERR_MODEL_SHAPE',
    });
    const wordPiece = join(dir, 'wordpiece');
    writeTinyTokenizerFolder(wordPiece, { bosStep: false });
    const json = JSON.parse(readFileSync(join(wordPiece, 'tokenizer.json'), 'utf8'));
    json.pre_tokenizer = { type: 'Whitespace' };
    writeFileSync(join(wordPiece, 'tokenizer.json'), JSON.stringify(json));
    await assert.rejects(writeTinyModel({ ...SMALL, out, tokenizer: wordPiece }), (err: Error) => {
      assert.equal((err as { code?: string }).code, 'ERR_MODEL_TOKENIZER');
      assert.match(
        err.message,
        /^--tokenizer .*wordpiece: its pre-tokenizer has no llama.cpp name/,
      );
      return true;
    });
    json.pre_tokenizer = JSON.parse(
      readFileSync(join(tinyFolder, 'tokenizer.json'), 'utf8'),
    ).pre_tokenizer;
    json.model.ignore_merges = false;
    writeFileSync(join(wordPiece, 'tokenizer.json'), JSON.stringify(json));
    await assert.rejects(writeTinyModel({ ...SMALL, out, tokenizer: wordPiece }), {
      code: 'ERR_MODEL_TOKENIZER',
      message:
        /model.ignore_merges is false, but llama.cpp's llama-bpe pre-tokenizer looks whole words up first/,
    });
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.startsWith('.refused') || f === 'refused.gguf'),
      [],
    );
  });
});
