/**
 * Router micro-benchmark. `npm run bench:router [-- --json]`.
 * - pickUs: one `cost` decision for an 8,000-token prompt (6,000 tokens from one of 200 shared
 *   prefixes + 2,000 unique; 500 blocks of 16) over 64 replicas with 1,000,000 blocks indexed,
 *   block keys computed inside the measurement (computeBlockKeys + Router.route).
 * - eventsPerS: block events (stored, then removed) applied per second through Router.applyEvents,
 *   into a new router's presized tables (a cold start: the system maps each of their pages on its
 *   first write). eventsSteadyPerS: the same events into a router that held them all once, its
 *   pages mapped, as a gateway's are once it has run a while. No target; it shows what of the
 *   cold figure is the first writes (the readable table gives each one's page faults).
 * - foreignEventsPerS: the same for events as a vLLM engine sends them (its own 64-bit hashes,
 *   keyed on their token ids), through Router.applyForeignEvents: the gateway's path, each
 *   replica's engine hash map made room for its blocks first (Router.reserveEngineBlocks, as the
 *   gateway does once a backend's /metrics gives its `num_gpu_blocks`, before its events apply).
 * - foreignColdEventsPerS: the same into maps told nothing, which grow as the events fill them.
 * - foreignWireEventsPerS: foreignEventsPerS from the wire: each batch of events encoded as vLLM
 *   publishes it (msgpack, positional arrays: its msgspec structs are array_like), then decoded
 *   (decodeEventBatch) and applied, the gateway's whole path from a ZMQ frame. No target: what a
 *   real fleet's events cost a gateway's event loop.
 * Each figure is the median of RUNS runs.
 */
import { computeBlockKeys, toWireHash } from '../src/kv/blockKey.ts';
import type { KvEvent } from '../src/kv/events.ts';
import { decodeEventBatch, encodeEventBatch } from '../src/kv/wire.ts';
import { type ForeignKvEvent, Router } from '../src/router/index.ts';
import { Rng } from '../src/util/rng.ts';
import { readBenchArgs } from './flags.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const REPLICAS = 64;
const BLOCK_SIZE = 16;
const PREFIXES = 200;
const PREFIX_TOKENS = 6_000;
const UNIQUE_TOKENS = 2_000;
const OWNERS_PER_PREFIX = 2;
const INDEXED_BLOCKS = 1_000_000;
const BLOCKS_PER_EVENT = 32;
const EVENTS_PER_BATCH = 8;
const WARMUP_PICKS = 2_000;
const PICKS = 20_000;
const ARRIVAL_GAP_MS = 25;
const REPORT_EVERY_MS = 100;
const VOCAB = 128_000;
/** Replicas whose events also go through the foreign (vLLM hash) path. */
const FOREIGN_REPLICAS = 8;

const names = Array.from({ length: REPLICAS }, (_, i) => `replica-${i}`);

/**
 * Pushed in a loop, not Array.from over an array-like (that took most of the benchmark's wall
 * time); pushes keep the array packed, as a decoded JSON array is.
 */
function randomTokens(rng: Rng, count: number): number[] {
  const tokens: number[] = [];
  for (let i = 0; i < count; i++) tokens.push(rng.int(VOCAB));
  return tokens;
}

/** A chain's keys as BlockStored events of BLOCKS_PER_EVENT blocks, tokens included. */
function storedEvents(tokens: number[], keys: number[]): KvEvent[] {
  const events: KvEvent[] = [];
  for (let b = 0; b < keys.length; b += BLOCKS_PER_EVENT) {
    const blockKeys = keys.slice(b, b + BLOCKS_PER_EVENT);
    events.push({
      type: 'BlockStored',
      blockKeys,
      parentKey: b === 0 ? null : keys[b - 1]!,
      tokenIds: tokens.slice(b * BLOCK_SIZE, (b + blockKeys.length) * BLOCK_SIZE),
      blockSize: BLOCK_SIZE,
      loraName: null,
      cacheSalt: null,
    });
  }
  return events;
}

interface Fleet {
  prefixes: number[][];
  /** Events per replica that index INDEXED_BLOCKS blocks in all. */
  stored: KvEvent[][];
  blocks: number;
}

function makeFleet(rng: Rng): Fleet {
  const stored: KvEvent[][] = names.map(() => []);
  const prefixes: number[][] = [];
  let blocks = 0;
  for (let p = 0; p < PREFIXES; p++) {
    const tokens = randomTokens(rng, PREFIX_TOKENS);
    prefixes.push(tokens);
    const keys = computeBlockKeys(tokens, BLOCK_SIZE);
    for (let o = 0; o < OWNERS_PER_PREFIX; o++) {
      stored[(p * 7 + o * 13) % REPLICAS]!.push(...storedEvents(tokens, keys));
      blocks += keys.length;
    }
  }
  // Fill with unique conversations, each on one replica.
  for (let c = 0; blocks < INDEXED_BLOCKS; c++) {
    const tokens = randomTokens(rng, Math.min(8_000, (INDEXED_BLOCKS - blocks) * BLOCK_SIZE));
    const keys = computeBlockKeys(tokens, BLOCK_SIZE);
    stored[c % REPLICAS]!.push(...storedEvents(tokens, keys));
    blocks += keys.length;
  }
  return { prefixes, stored, blocks };
}

function applyAll(router: Router, perReplica: KvEvent[][], nowMs: number): number {
  let blocks = 0;
  perReplica.forEach((events, r) => {
    for (let i = 0; i < events.length; i += EVENTS_PER_BATCH) {
      blocks += router.applyEvents(names[r]!, events.slice(i, i + EVENTS_PER_BATCH), nowMs);
    }
  });
  return blocks;
}

function percentile(sorted: Float64Array, q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

interface RunResult {
  p50Us: number;
  p99Us: number;
  /** The computeBlockKeys part of a pick, for the readable table. */
  keysP50Us: number;
  /** Its p99: pure arithmetic, so how far it lies from the p50 is the machine's own noise. */
  keysP99Us: number;
  eventsPerS: number;
  coldFaults: number;
  eventsSteadyPerS: number;
  steadyFaults: number;
  foreignEventsPerS: number;
  foreignColdEventsPerS: number;
  foreignWireEventsPerS: number;
}

/** A replica's events as a vLLM engine publishes them: wire hashes, not kvroute keys. */
function toForeign(events: readonly KvEvent[]): ForeignKvEvent[] {
  return events.map((e) =>
    e.type === 'BlockStored'
      ? {
          type: 'BlockStored',
          blockHashes: e.blockKeys.map(toWireHash),
          parentBlockHash: e.parentKey === null ? null : toWireHash(e.parentKey),
          tokenIds: e.tokenIds as number[],
          blockSize: e.blockSize,
          loraName: null,
          cacheSalt: null,
        }
      : e.type === 'BlockRemoved'
        ? { type: 'BlockRemoved', blockHashes: e.blockKeys.map(toWireHash) }
        : e,
  );
}

/** A removal of each stored event's blocks. */
function removalsOf(events: KvEvent[]): KvEvent[] {
  return events.map((e) => ({
    type: 'BlockRemoved',
    blockKeys: e.type === 'BlockStored' ? e.blockKeys : [],
  }));
}

/** Removals of every fourth stored event's blocks, per replica. */
function quarterRemovals(stored: KvEvent[][]): KvEvent[][] {
  return stored.map((events) => removalsOf(events.filter((_, i) => i % 4 === 3)));
}

/**
 * A router for the foreign path's replicas, and their stored events. `reserve`: each replica's
 * map is told its block count first (the least a real engine's pool holds).
 */
function foreignRouter(fleet: Fleet, seed: number, reserve: boolean) {
  const router = new Router({ replicas: names.slice(0, FOREIGN_REPLICAS), seed });
  const perReplica = fleet.stored.slice(0, FOREIGN_REPLICAS);
  if (reserve) {
    perReplica.forEach((events, r) => {
      const blocks = events.reduce(
        (n, e) => n + (e.type === 'BlockStored' ? e.blockKeys.length : 0),
        0,
      );
      router.reserveEngineBlocks(names[r]!, blocks);
    });
  }
  return { router, perReplica };
}

/** `events` in batches of EVENTS_PER_BATCH, as an engine publishes them. */
function batchesOf<T>(events: readonly T[]): T[][] {
  const batches: T[][] = [];
  for (let i = 0; i < events.length; i += EVENTS_PER_BATCH) {
    batches.push(events.slice(i, i + EVENTS_PER_BATCH));
  }
  return batches;
}

/**
 * Applies each replica's units (`phases[p][replica]`: stored, then a quarter removed), timed
 * together; blocks changed per second.
 */
function timedIngest<T>(phases: T[][][], apply: (replica: number, unit: T) => number): number {
  const t0 = performance.now();
  let changed = 0;
  for (const perReplica of phases) {
    perReplica.forEach((units, r) => {
      for (const unit of units) changed += apply(r, unit);
    });
  }
  return changed / ((performance.now() - t0) / 1000);
}

/** Stores then removes a quarter, through the foreign path; blocks changed per second. */
function foreignIngest(fleet: Fleet, seed: number, reserve: boolean): number {
  const { router, perReplica } = foreignRouter(fleet, seed, reserve);
  const batches = (events: KvEvent[]) => batchesOf(toForeign(events));
  return timedIngest(
    [perReplica.map(batches), quarterRemovals(perReplica).map(batches)],
    (r, batch) => router.applyForeignEvents(names[r]!, batch, 0),
  );
}

/** foreignIngest (maps reserved) from vLLM's msgpack payloads, each decoded then applied. */
function foreignWireIngest(fleet: Fleet, seed: number): number {
  const { router, perReplica } = foreignRouter(fleet, seed, true);
  const payloads = (events: KvEvent[]) =>
    batchesOf(events).map((batch) => encodeEventBatch(batch, { tsS: 0, format: 'array' }));
  return timedIngest(
    [perReplica.map(payloads), quarterRemovals(perReplica).map(payloads)],
    (r, payload) => router.applyForeignEvents(names[r]!, decodeEventBatch(payload).events, 0),
  );
}

/** A router presized for the fleet's blocks, as the picks use it. */
function eventRouter(seed: number): Router {
  return new Router({
    replicas: names,
    policy: 'cost',
    indexMode: 'events',
    expectedKeys: INDEXED_BLOCKS,
    seed,
  });
}

/** The fleet's stores, then a quarter of them removed, timed together, and the page faults. */
function timedStoresAndRemovals(router: Router, fleet: Fleet, removals: KvEvent[][]) {
  const faults0 = process.resourceUsage().minorPageFault;
  const t0 = performance.now();
  let changed = applyAll(router, fleet.stored, 0);
  changed += applyAll(router, removals, 0);
  return {
    perS: changed / ((performance.now() - t0) / 1000),
    faults: process.resourceUsage().minorPageFault - faults0,
  };
}

/** A router for the picks, and its ingest into tables never written before (a cold start). */
function ingest(fleet: Fleet, seed: number) {
  const router = eventRouter(seed);
  const cold = timedStoresAndRemovals(router, fleet, quarterRemovals(fleet.stored));
  return { router, eventsPerS: cold.perS, coldFaults: cold.faults };
}

/**
 * The same ingest into a router that held the fleet once and had every block removed: its
 * tables' pages are mapped already, as in a gateway that has run a while. A cold start also
 * pays the system's first write to each page of its presized tables (a page fault each).
 */
function steadyIngest(fleet: Fleet, seed: number) {
  const router = eventRouter(seed);
  applyAll(router, fleet.stored, 0);
  applyAll(router, fleet.stored.map(removalsOf), 0);
  const steady = timedStoresAndRemovals(router, fleet, quarterRemovals(fleet.stored));
  return { eventsSteadyPerS: steady.perS, steadyFaults: steady.faults };
}

function run(fleet: Fleet, seed: number): RunResult {
  const { router, eventsPerS, coldFaults } = ingest(fleet, seed);
  // Put the removed quarter back so 1M blocks are indexed for the picks.
  applyAll(
    router,
    fleet.stored.map((events) => events.filter((_, i) => i % 4 === 3)),
    0,
  );

  const rng = new Rng(seed);
  const samples = new Float64Array(PICKS);
  const keySamples = new Float64Array(PICKS);
  let nowMs = 0;
  let nextReportMs = 0;
  for (let i = 0; i < WARMUP_PICKS + PICKS; i++) {
    nowMs += ARRIVAL_GAP_MS;
    if (nowMs >= nextReportMs) {
      for (const name of names)
        router.onReport(name, { kvUsage: 0.5, running: 8, waiting: 0 }, nowMs);
      nextReportMs = nowMs + REPORT_EVERY_MS;
    }
    const tokens = fleet.prefixes[rng.int(PREFIXES)]!.concat(randomTokens(rng, UNIQUE_TOKENS));
    const id = `r${i}`;
    const start = performance.now();
    const blockKeys = computeBlockKeys(tokens, BLOCK_SIZE);
    const keyed = performance.now();
    router.route({ id, blockKeys, promptTokens: tokens.length, blockSize: BLOCK_SIZE }, nowMs);
    const end = performance.now();
    if (i >= WARMUP_PICKS) {
      samples[i - WARMUP_PICKS] = (end - start) * 1000;
      keySamples[i - WARMUP_PICKS] = (keyed - start) * 1000;
    }
    router.onFirstToken(id, nowMs);
    router.onFinished(id, nowMs);
  }
  samples.sort();
  keySamples.sort();
  return {
    p50Us: percentile(samples, 0.5),
    p99Us: percentile(samples, 0.99),
    keysP50Us: percentile(keySamples, 0.5),
    keysP99Us: percentile(keySamples, 0.99),
    eventsPerS,
    coldFaults,
    foreignEventsPerS: foreignIngest(fleet, seed, true),
    foreignColdEventsPerS: foreignIngest(fleet, seed, false),
    foreignWireEventsPerS: foreignWireIngest(fleet, seed),
    ...steadyIngest(fleet, seed),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const json = readBenchArgs('bench:router', { json: { type: 'boolean' } }).json === true;
const fleet = makeFleet(new Rng(1));
// The ingest paths once untimed, so that no run times them before they are compiled (a first
// run's figures were half the later ones'): a gateway applies events for hours.
ingest(fleet, 99);
foreignIngest(fleet, 99, true);
foreignWireIngest(fleet, 99);
const runs: RunResult[] = [];
for (let r = 0; r < RUNS; r++) runs.push(run(fleet, 100 + r));
const result = {
  pickUs: {
    p50: Number(median(runs.map((r) => r.p50Us)).toFixed(2)),
    p99: Number(median(runs.map((r) => r.p99Us)).toFixed(2)),
  },
  eventsPerS: Math.round(median(runs.map((r) => r.eventsPerS))),
  eventsSteadyPerS: Math.round(median(runs.map((r) => r.eventsSteadyPerS))),
  foreignEventsPerS: Math.round(median(runs.map((r) => r.foreignEventsPerS))),
  foreignColdEventsPerS: Math.round(median(runs.map((r) => r.foreignColdEventsPerS))),
  foreignWireEventsPerS: Math.round(median(runs.map((r) => r.foreignWireEventsPerS))),
};
if (json) {
  console.log(JSON.stringify(result));
} else {
  console.log(
    `router benchmark: ${REPLICAS} replicas, ${fleet.blocks.toLocaleString()} blocks indexed, ` +
      `${PREFIX_TOKENS + UNIQUE_TOKENS}-token prompts, median of ${RUNS} runs`,
  );
  console.table(
    runs.map((r, i) => ({
      run: i + 1,
      'pick p50 (us)': r.p50Us.toFixed(2),
      'pick p99 (us)': r.p99Us.toFixed(2),
      'of which keys p50 (us)': r.keysP50Us.toFixed(2),
      'keys p99 (us)': r.keysP99Us.toFixed(2),
      'events/s': Math.round(r.eventsPerS).toLocaleString(),
      'its page faults': r.coldFaults.toLocaleString(),
      'the same, pages mapped': Math.round(r.eventsSteadyPerS).toLocaleString(),
      'their page faults': r.steadyFaults.toLocaleString(),
      'vLLM-hash events/s': Math.round(r.foreignEventsPerS).toLocaleString(),
      'the same, maps not told (grown)': Math.round(r.foreignColdEventsPerS).toLocaleString(),
      'the same, decoded from msgpack': Math.round(r.foreignWireEventsPerS).toLocaleString(),
    })),
  );
  console.log(
    `median: pick p50 ${result.pickUs.p50} us (target <= 12), p99 ${result.pickUs.p99} us ` +
      `(target <= 25), events ${result.eventsPerS.toLocaleString()}/s (target >= 15,000,000; ` +
      `${result.eventsSteadyPerS.toLocaleString()}/s into pages mapped before), ` +
      `vLLM-hash events ${result.foreignEventsPerS.toLocaleString()}/s (target >= 5,000,000; ` +
      `${result.foreignColdEventsPerS.toLocaleString()}/s into maps not told their size, ` +
      `${result.foreignWireEventsPerS.toLocaleString()}/s decoded from vLLM's msgpack first)`,
  );
}
