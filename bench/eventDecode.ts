/**
 * Decoding vLLM's KV event batches: CPU ns per block of `decodeEventBatch` over batches as vLLM
 * publishes them (msgpack, positional arrays: its msgspec structs are array_like; 8 BlockStored
 * events of 32 blocks of 16 tokens each), the first step of the gateway's path from a ZMQ frame.
 *
 *   node --import tsx bench/eventDecode.ts [--rounds 8]
 *   BASELINE_SRC=/tmp/base/src node --import tsx bench/eventDecode.ts   # against another tree
 *
 * Each tree decodes in a child process of its own, the trees alternating round by round: msgpackr
 * keeps module-wide state (its native string extractor, set when its main entry is imported), so
 * two trees in one process would decode alike. Prints each tree's median and the median of the
 * per-round ratios (this tree / baseline).
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { baselineSrc } from './baselineSrc.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const BLOCKS_PER_EVENT = 32;
const EVENTS_PER_BATCH = 8;
const BATCHES = 400;
const BLOCK_SIZE = 16;
const WARMUP = 5;
const TIMED = 20;
const CHILD = 'KVROUTE_DECODE_SRC';

/** Child: decode with the tree at `src`; prints the median CPU ns per block. */
async function child(src: string): Promise<void> {
  const here = resolve(import.meta.dirname, '../src');
  const { encodeEventBatch } = await import(resolve(here, 'kv/wire.ts'));
  const { computeBlockKeys } = await import(resolve(here, 'kv/blockKey.ts'));
  const { Rng } = await import(resolve(here, 'util/rng.ts'));
  const { decodeEventBatch } = await import(resolve(src, 'kv/wire.ts'));
  const rng = new Rng(3);
  const payloads: Buffer[] = [];
  for (let b = 0; b < BATCHES; b++) {
    const events = [];
    for (let e = 0; e < EVENTS_PER_BATCH; e++) {
      const tokenIds: number[] = [];
      for (let i = 0; i < BLOCKS_PER_EVENT * BLOCK_SIZE; i++) tokenIds.push(rng.int(128_000));
      const blockKeys = computeBlockKeys(tokenIds, BLOCK_SIZE);
      events.push({ type: 'BlockStored', blockKeys, parentKey: null, tokenIds, blockSize: 16 });
    }
    payloads.push(encodeEventBatch(events, { tsS: 0, format: 'array' }));
  }
  const blocks = BATCHES * EVENTS_PER_BATCH * BLOCKS_PER_EVENT;
  const perBlockNs: number[] = [];
  let decoded = 0;
  for (let r = 0; r < WARMUP + TIMED; r++) {
    const since = process.cpuUsage();
    for (const payload of payloads) decoded += decodeEventBatch(payload).events.length;
    const used = process.cpuUsage(since);
    if (r >= WARMUP) perBlockNs.push(((used.user + used.system) * 1000) / blocks);
  }
  if (decoded !== (WARMUP + TIMED) * BATCHES * EVENTS_PER_BATCH) throw new Error('events lost');
  process.stdout.write(`${median(perBlockNs)}\n`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function runTree(src: string): number {
  const out = execFileSync(process.execPath, ['--import', 'tsx', import.meta.filename], {
    env: { ...process.env, [CHILD]: src },
    encoding: 'utf8',
  });
  return Number(out.trim());
}

async function main(): Promise<void> {
  const values = readBenchArgs('eventDecode', { rounds: { type: 'string' } });
  const rounds = benchFlags('eventDecode').positiveInt('rounds', values.rounds, 8);
  const current = resolve(import.meta.dirname, '../src');
  const baseline = baselineSrc(false);
  const ns: Record<string, number[]> = { current: [], baseline: [] };
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const now = runTree(current);
    ns.current!.push(now);
    if (baseline === undefined) continue;
    const base = runTree(baseline);
    ns.baseline!.push(base);
    ratios.push(now / base);
  }
  const row = (xs: number[]) => Math.round(median(xs));
  console.log(
    JSON.stringify({
      decodeNsPerBlock: row(ns.current!),
      ...(baseline !== undefined && {
        baselineNsPerBlock: row(ns.baseline!),
        ratio: Math.round(median(ratios) * 1000) / 1000,
      }),
    }),
  );
}

const src = process.env[CHILD];
await (src === undefined ? main() : child(src));
