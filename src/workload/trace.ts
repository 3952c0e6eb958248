/**
 * Mooncake traces (JSONL: `timestamp` ms, `input_length`, `output_length`, `hash_ids` of
 * 512-token blocks). The file is read line by line as the simulation consumes it. Each hash id
 * gets a deterministic 512-token stream, so equal hash ids give equal tokens and the engine and
 * router see ordinary block keys; a record's last block takes the first tokens of its id's
 * stream. `makeSyntheticTrace` writes a small trace of the same format for tests.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import { fillTokens, KeyExtender, mixSeed } from './tokens.ts';
import type { Arrival, Materialized } from './workloads.ts';
import type { Workload } from './types.ts';

/** Tokens per hash id in the Mooncake format. */
export const TRACE_BLOCK_TOKENS = 512;

export interface TraceRecord {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export class TraceError extends Error {
  readonly code = 'ERR_TRACE';
}

/** Lines of a file, read in 1 MiB chunks. */
export function* readLines(path: string): Generator<string> {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    const decoder = new StringDecoder('utf8');
    let rest = '';
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      const text = rest + decoder.write(buf.subarray(0, n));
      const lines = text.split('\n');
      rest = lines.pop()!;
      for (const line of lines) yield line;
    }
    rest += decoder.end();
    if (rest.length > 0) yield rest;
  } finally {
    closeSync(fd);
  }
}

export function parseRecord(line: string, where: string): TraceRecord {
  let r: unknown;
  try {
    r = JSON.parse(line);
  } catch {
    throw new TraceError(`${where}: not JSON`);
  }
  const rec = r as Partial<TraceRecord>;
  const ok =
    typeof rec === 'object' &&
    rec !== null &&
    Number.isFinite(rec.timestamp) &&
    Number.isInteger(rec.input_length) &&
    rec.input_length! >= 1 &&
    Number.isInteger(rec.output_length) &&
    Array.isArray(rec.hash_ids);
  if (!ok) {
    throw new TraceError(
      `${where}: expected {timestamp, input_length, output_length, hash_ids}, got ${line.slice(0, 80)}`,
    );
  }
  if (rec.hash_ids!.length < Math.ceil(rec.input_length! / TRACE_BLOCK_TOKENS)) {
    throw new TraceError(
      `${where}: ${rec.hash_ids!.length} hash_ids for ${rec.input_length} tokens`,
    );
  }
  return rec as TraceRecord;
}

export interface TraceOptions {
  path: string;
  seed: number;
  blockSize: number;
  /** Arrival-rate multiplier: 2 replays the trace twice as fast (timestamps halved). */
  rateScale: number;
  /** Stop at this simulated time (after scaling); default: the whole trace. */
  durationMs?: number;
}

/** Keys of one hash id's 512-token block, valid for the parent key they were built on. */
interface HashBlock {
  parent: BlockKey | null;
  keys: BlockKey[];
}

export class TraceWorkload implements Workload {
  readonly name: string;
  readonly blockSize: number;
  readonly customers = 0;
  readonly watchedCustomer = null;
  readonly #opts: TraceOptions;
  readonly #extender: KeyExtender;
  readonly #blocks = new Map<number, HashBlock>();
  readonly #scratch = new Array<number>(TRACE_BLOCK_TOKENS);

  constructor(opts: TraceOptions) {
    if (TRACE_BLOCK_TOKENS % opts.blockSize !== 0) {
      throw new TraceError(`--block-size ${opts.blockSize} must divide ${TRACE_BLOCK_TOKENS}`);
    }
    this.name = `trace:${opts.path.split('/').pop()}`;
    this.blockSize = opts.blockSize;
    this.#opts = opts;
    this.#extender = new KeyExtender(opts.blockSize);
  }

  *arrivals(): Iterator<Arrival> {
    let lineNo = 0;
    let lastMs = Number.NEGATIVE_INFINITY;
    for (const line of readLines(this.#opts.path)) {
      lineNo++;
      if (line.trim() === '') continue;
      const rec = parseRecord(line, `${this.#opts.path}:${lineNo}`);
      const atMs = Math.max(rec.timestamp / this.#opts.rateScale, lastMs);
      lastMs = atMs;
      if (this.#opts.durationMs !== undefined && atMs >= this.#opts.durationMs) return;
      yield {
        atMs,
        customer: rec.hash_ids[0] ?? -1,
        promptLength: rec.input_length,
        outputTokens: Math.max(1, rec.output_length),
        seed: lineNo,
        hashIds: rec.hash_ids,
      };
    }
  }

  materialize(a: Arrival): Materialized {
    const ids = a.hashIds ?? [];
    const tokens = new Int32Array(a.promptLength);
    const blockKeys: BlockKey[] = [];
    const perHash = TRACE_BLOCK_TOKENS / this.blockSize;
    let parent: BlockKey | null = null;
    for (let h = 0; h * TRACE_BLOCK_TOKENS < a.promptLength; h++) {
      const id = ids[h]!;
      const at = h * TRACE_BLOCK_TOKENS;
      const count = Math.min(TRACE_BLOCK_TOKENS, a.promptLength - at);
      const stream = mixSeed(this.#opts.seed, id);
      fillTokens(tokens, at, count, stream);
      // Mooncake ids are prefix hashes, so an id's keys recur under the same parent; check it.
      let block = this.#blocks.get(id);
      if (block === undefined || block.parent !== parent) {
        fillTokens(this.#scratch, 0, TRACE_BLOCK_TOKENS, stream);
        block = { parent, keys: this.#extender.extend(this.#scratch, 0, parent, []) };
        if (this.#blocks.size >= 200_000) this.#blocks.clear();
        this.#blocks.set(id, block);
      }
      const full = Math.floor(count / this.blockSize);
      for (let b = 0; b < full; b++) blockKeys.push(block.keys[b]!);
      if (full < perHash) break;
      parent = block.keys[perHash - 1]!;
    }
    return { tokens, blockKeys };
  }

  prefixWatchKey(): BlockKey | null {
    return null;
  }
}

export interface SyntheticTraceOptions {
  seed: number;
  requests: number;
  ratePerS: number;
  /** Distinct shared roots (system prompts); popularity falls off as 1 / rank. */
  roots: number;
  /** Shared 512-token blocks per root. */
  sharedBlocks: number;
  /** Unique 512-token blocks per request, uniform in [1, maxUniqueBlocks]. */
  maxUniqueBlocks: number;
  outputTokens: number;
  /** Every this many requests, one (the last of each run of that many) is long... */
  longPromptEvery?: number;
  /** ...with this many unique 512-token blocks after its root (196: a ~100k-token prompt). */
  longPromptBlocks?: number;
}

/** A small trace in the Mooncake format, as JSONL text (for tests where ../shared is absent). */
export function makeSyntheticTrace(opts: SyntheticTraceOptions): string {
  const rng = Rng.derive(opts.seed, 'synthetic-trace');
  const weights = Array.from({ length: opts.roots }, (_, r) => 1 / (r + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  let nextId = opts.roots * opts.sharedBlocks;
  let atMs = 0;
  const lines: string[] = [];
  for (let i = 0; i < opts.requests; i++) {
    let u = rng.next() * total;
    let root = 0;
    while (root < opts.roots - 1 && u >= weights[root]!) u -= weights[root++]!;
    const ids: number[] = [];
    for (let b = 0; b < opts.sharedBlocks; b++) ids.push(root * opts.sharedBlocks + b);
    const drawn = rng.range(1, opts.maxUniqueBlocks);
    const long =
      opts.longPromptEvery !== undefined && i % opts.longPromptEvery === opts.longPromptEvery - 1;
    const unique = long ? (opts.longPromptBlocks ?? drawn) : drawn;
    for (let b = 0; b < unique; b++) ids.push(nextId++);
    const inputLength = (ids.length - 1) * TRACE_BLOCK_TOKENS + rng.range(1, TRACE_BLOCK_TOKENS);
    lines.push(
      JSON.stringify({
        timestamp: Math.round(atMs),
        input_length: inputLength,
        output_length: rng.range(1, opts.outputTokens * 2),
        hash_ids: ids,
      }),
    );
    atMs += rng.exponential(1000 / opts.ratePerS);
  }
  return `${lines.join('\n')}\n`;
}
