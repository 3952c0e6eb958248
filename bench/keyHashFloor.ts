/**
 * What a pick's block keys could cost at best (#36): `node --import tsx bench/keyHashFloor.ts
 * [--rounds N] [--json]`. bench:router's pick hashes an 8,000-token prompt (500 blocks of 16)
 * before it walks the index; this times that hash (`computeBlockKeys`, the pick's own call) beside
 * two ways around it, each in alternating rounds in this one process, as CPU µs a prompt:
 * - `wasmSimd*`: the same keys from a WebAssembly SIMD build of chainKeys16 (`keyHash16.wat`,
 *   one i32x4 per four tokens). `wasmSimdHashOnlyUs` leaves the tokens in its memory already;
 *   `wasmSimdFromInt32ArrayUs` copies them in from an Int32Array first (a memcpy) and
 *   `wasmSimdFromArrayUs` from a plain array, which is what a tokenizer and JSON.parse hand the
 *   gateway. Every key is checked against computeBlockKeys' before any timing.
 * - `compareUs`: a cache of known prompts could skip hashing a prefix it holds, but it must still
 *   compare the prompt's tokens with the ones it kept (a key is only a hash): this times that
 *   comparison for the prompt's 6,000 prefix tokens, 16 at a time, against an Int32Array.
 * Ratios are against `jsUs` in the same round, then the median over rounds.
 */
import { readFileSync } from 'node:fs';
import wabtInit from 'wabt';
import { chainBlockKeys, computeBlockKeys } from '../src/kv/blockKey.ts';
import { Rng } from '../src/util/rng.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('keyHashFloor', {
  rounds: { type: 'string' },
  json: { type: 'boolean' },
});
const ROUNDS = Number(values.rounds ?? 7);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) {
  process.stderr.write(`keyHashFloor: --rounds takes a positive integer, got '${values.rounds}'\n`);
  process.exit(2);
}
const BLOCK_SIZE = 16;
const PROMPT_TOKENS = 8_000;
const PREFIX_TOKENS = 6_000;
const BLOCKS = PROMPT_TOKENS / BLOCK_SIZE;
const CALLS = 20_000;
const VOCAB = 128_000;
/** Where the keys go in the module's memory, past the tokens. */
const OUT_BYTE = PROMPT_TOKENS * 4;

/** What is used of WebAssembly (the project's TypeScript libraries leave the DOM's types out). */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: object };
};

interface Keys16 {
  memory: { buffer: ArrayBuffer };
  keys16(tokByte: number, blocks: number, hi: number, lo: number, outByte: number): void;
}

const wabt = await wabtInit();
const wat = readFileSync(new URL('./keyHash16.wat', import.meta.url), 'utf8');
const { buffer } = wabt.parseWat('keyHash16.wat', wat, { simd: true }).toBinary({});
const wasm = new WebAssembly.Instance(new WebAssembly.Module(buffer)).exports as unknown as Keys16;
const heapTokens = new Int32Array(wasm.memory.buffer, 0, PROMPT_TOKENS);
const heapKeys = new Float64Array(wasm.memory.buffer, OUT_BYTE, BLOCKS);

/** The keys of heapTokens' blocks, chained from `parent`, into a new array as the JS path makes. */
function wasmKeys(parent: number): number[] {
  wasm.keys16(0, BLOCKS, Math.floor(parent / 4294967296), parent | 0, OUT_BYTE);
  const out = new Array<number>(BLOCKS);
  for (let b = 0; b < BLOCKS; b++) out[b] = heapKeys[b]!;
  return out;
}

/** Blocks of `kept` that `tokens` starts with, 16 tokens compared per test. */
function sameBlocks(tokens: readonly number[], kept: Int32Array, blocks: number): number {
  let b = 0;
  for (let i = 0; b < blocks; b++, i += 16) {
    // Written out: one test a block, no inner loop (a loop over j took 1.5x as long).
    const diff =
      (tokens[i]! ^ kept[i]!) |
      (tokens[i + 1]! ^ kept[i + 1]!) |
      (tokens[i + 2]! ^ kept[i + 2]!) |
      (tokens[i + 3]! ^ kept[i + 3]!) |
      (tokens[i + 4]! ^ kept[i + 4]!) |
      (tokens[i + 5]! ^ kept[i + 5]!) |
      (tokens[i + 6]! ^ kept[i + 6]!) |
      (tokens[i + 7]! ^ kept[i + 7]!) |
      (tokens[i + 8]! ^ kept[i + 8]!) |
      (tokens[i + 9]! ^ kept[i + 9]!) |
      (tokens[i + 10]! ^ kept[i + 10]!) |
      (tokens[i + 11]! ^ kept[i + 11]!) |
      (tokens[i + 12]! ^ kept[i + 12]!) |
      (tokens[i + 13]! ^ kept[i + 13]!) |
      (tokens[i + 14]! ^ kept[i + 14]!) |
      (tokens[i + 15]! ^ kept[i + 15]!);
    if (diff !== 0) break;
  }
  return b;
}

const rng = new Rng(36);
const tokens: number[] = [];
for (let i = 0; i < PROMPT_TOKENS; i++) tokens.push(rng.int(VOCAB));
const typed = Int32Array.from(tokens);
const kept = typed.slice(0, PREFIX_TOKENS);

// The WebAssembly keys must be the pick's keys. The root's parent words are blockKey.ts' own, so
// both builds chain from a parent: the prompt's first key, over the blocks after it.
const parent = computeBlockKeys(tokens, BLOCK_SIZE)[0]!;
const want = chainBlockKeys(tokens.slice(BLOCK_SIZE), BLOCK_SIZE, parent);
heapTokens.set(tokens.slice(BLOCK_SIZE));
const got = wasmKeys(parent).slice(0, want.length);
if (got.some((k, i) => k !== want[i])) {
  process.stderr.write('keyHashFloor: the WebAssembly keys differ from computeBlockKeys\n');
  process.exit(1);
}

let sink = 0;
const ways: Record<string, () => void> = {
  jsUs: () => {
    sink += computeBlockKeys(tokens, BLOCK_SIZE).length;
  },
  wasmSimdHashOnlyUs: () => {
    sink += wasmKeys(parent).length;
  },
  wasmSimdFromInt32ArrayUs: () => {
    heapTokens.set(typed);
    sink += wasmKeys(parent).length;
  },
  wasmSimdFromArrayUs: () => {
    heapTokens.set(tokens);
    sink += wasmKeys(parent).length;
  },
  compareUs: () => {
    sink += sameBlocks(tokens, kept, PREFIX_TOKENS / BLOCK_SIZE);
  },
};

/** CPU µs a call of `fn`, over CALLS calls. */
function cpuUsPerCall(fn: () => void): number {
  const t0 = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) fn();
  const used = process.cpuUsage(t0);
  return (used.user + used.system) / CALLS;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
for (const fn of Object.values(ways)) cpuUsPerCall(fn); // compiled before any round counts
const rounds: Record<string, number>[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const round: Record<string, number> = {};
  for (const [name, fn] of Object.entries(ways)) round[name] = cpuUsPerCall(fn);
  rounds.push(round);
}
const result: Record<string, number> = {};
for (const name of Object.keys(ways)) {
  result[name] = Number(median(rounds.map((r) => r[name]!)).toFixed(2));
  if (name !== 'jsUs') {
    const ratio = median(rounds.map((r) => r[name]! / r.jsUs!));
    result[`${name.replace(/Us$/, '')}VsJs`] = Number(ratio.toFixed(3));
  }
}
if (sink === 0) process.exit(1); // keeps the calls' results used
if (values.json) console.log(JSON.stringify(result));
else {
  console.log(
    `block keys of a ${PROMPT_TOKENS}-token prompt, CPU µs (median of ${ROUNDS} rounds of ${CALLS})`,
  );
  console.table(result);
}
