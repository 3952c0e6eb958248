/**
 * The longest single batch of vLLM-hash KV events while one replica's engine hash map fills to a
 * real pool's size: `node --import tsx bench/eventStall.ts [--blocks 100000,500000] [--json]`.
 * Each size runs twice, alternating, after a warm-up: with the replica's pool size reserved first
 * (`Router.reserveEngineBlocks`, as the gateway does once a backend's /metrics names its
 * `num_gpu_blocks`) and without (the map grows as the events fill it, a pass over each table per
 * growth). Batches of 8 events of 32 blocks, as bench:router's. The gateway applies events on the
 * thread that serves requests, so the longest batch is how long a request can wait behind them.
 * Prints, per size, the medians of three pairs: longest batch (ms) and the whole fill (ms).
 */
import { parseArgs } from 'node:util';
import { toWireHash } from '../src/kv/blockKey.ts';
import { type ForeignKvEvent, Router } from '../src/router/index.ts';

const { values } = parseArgs({
  options: { blocks: { type: 'string' }, json: { type: 'boolean' } },
});
const sizes = (values.blocks ?? '100000,500000').split(',').map(Number);
for (const n of sizes) {
  if (!Number.isInteger(n) || n < 32) {
    throw new Error(`--blocks takes whole numbers >= 32, comma-separated, not '${values.blocks}'`);
  }
}
const BLOCKS_PER_EVENT = 32;
const EVENTS_PER_BATCH = 8;
const BLOCK_SIZE = 16;

/** `blocks` blocks as BlockStored events, each block's hash and tokens distinct. */
function storedEvents(blocks: number): ForeignKvEvent[] {
  const events: ForeignKvEvent[] = [];
  for (let b = 0; b < blocks; b += BLOCKS_PER_EVENT) {
    const hashes: bigint[] = [];
    const tokenIds: number[] = [];
    for (let i = b; i < Math.min(blocks, b + BLOCKS_PER_EVENT); i++) {
      hashes.push(toWireHash(i * 4096 + 17));
      for (let t = 0; t < BLOCK_SIZE; t++) tokenIds.push((i * 31 + t) % 128_000);
    }
    events.push({
      type: 'BlockStored',
      blockHashes: hashes,
      parentBlockHash: null,
      tokenIds,
      blockSize: BLOCK_SIZE,
      loraName: null,
      cacheSalt: null,
    });
  }
  return events;
}

interface Fill {
  longestBatchMs: number;
  fillMs: number;
}

function fill(events: ForeignKvEvent[], blocks: number, reserve: boolean): Fill {
  const router = new Router({ replicas: ['replica'], seed: 1 });
  if (reserve) router.reserveEngineBlocks('replica', blocks);
  let longest = 0;
  const t0 = performance.now();
  for (let i = 0; i < events.length; i += EVENTS_PER_BATCH) {
    const t = performance.now();
    router.applyForeignEvents('replica', events.slice(i, i + EVENTS_PER_BATCH), 0);
    longest = Math.max(longest, performance.now() - t);
  }
  return { longestBatchMs: longest, fillMs: performance.now() - t0 };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const round2 = (x: number): number => Math.round(x * 100) / 100;

const rows = sizes.map((blocks) => {
  const events = storedEvents(blocks);
  for (let i = 0; i < 2; i++) {
    fill(events, blocks, true);
    fill(events, blocks, false);
  }
  const reserved: Fill[] = [];
  const grown: Fill[] = [];
  for (let i = 0; i < 3; i++) {
    reserved.push(fill(events, blocks, true));
    grown.push(fill(events, blocks, false));
  }
  const summary = (fills: Fill[]) => ({
    longestBatchMs: round2(median(fills.map((f) => f.longestBatchMs))),
    fillMs: round2(median(fills.map((f) => f.fillMs))),
  });
  return { blocks, reserved: summary(reserved), grown: summary(grown) };
});
if (values.json) console.log(JSON.stringify(rows));
else {
  console.table(
    rows.map((r) => ({
      blocks: r.blocks.toLocaleString(),
      'longest batch, reserved (ms)': r.reserved.longestBatchMs,
      'longest batch, grown (ms)': r.grown.longestBatchMs,
      'fill, reserved (ms)': r.reserved.fillMs,
      'fill, grown (ms)': r.grown.fillMs,
    })),
  );
}
