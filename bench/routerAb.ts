/**
 * bench:router's three figures for this tree's router against a baseline tree's, in one process,
 * rounds alternating, so that a busy machine weighs on both alike:
 *
 *   git archive <commit> src package.json | tar -x -C /tmp/base   # its sources and package.json
 *   BASELINE_SRC=/tmp/base/src node --import tsx bench/routerAb.ts [--rounds 5] [--picks 4000]
 *
 * The fleet is bench:router's (64 replicas, 1,000,000 blocks, 8,000-token prompts of a 6,000-
 * token shared prefix and 2,000 new tokens), built once and fed to both. Per round and tree: the
 * pick p50 (keys and route, wall clock), the mean pick in CPU time (what preemption does not
 * inflate), events/s (stores, then a quarter removed) and vLLM-hash events/s (the same through
 * the foreign path, 8 replicas, each told its block count first where the tree has
 * `reserveEngineBlocks`, as bench:router's foreignEventsPerS), those two also per CPU second.
 * Prints each tree's medians, the
 * median of the per-round ratios (this tree / baseline) and the load average.
 */
import { resolve } from 'node:path';
import { alternateRounds, loadSides, printAbTable, summarize } from './ab.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('routerAb', { rounds: { type: 'string' }, picks: { type: 'string' } });
const { positiveInt } = benchFlags('routerAb');
const ROUNDS = positiveInt('rounds', values.rounds, 5);
const PICKS = positiveInt('picks', values.picks, 4_000);
const WARMUP_PICKS = 1_000;
const REPLICAS = 64;
const BLOCK_SIZE = 16;
const PREFIXES = 200;
const PREFIX_TOKENS = 6_000;
const UNIQUE_TOKENS = 2_000;
const INDEXED_BLOCKS = 1_000_000;
const BLOCKS_PER_EVENT = 32;
const EVENTS_PER_BATCH = 8;
const FOREIGN_REPLICAS = 8;
const VOCAB = 128_000;

interface Stored {
  type: 'BlockStored';
  blockKeys: number[];
  parentKey: number | null;
  tokenIds: number[];
  blockSize: number;
  loraName: null;
  cacheSalt: null;
}
type Event = Stored | { type: 'BlockRemoved'; blockKeys: number[] };
type Foreign =
  | (Omit<Stored, 'blockKeys' | 'parentKey'> & {
      blockHashes: bigint[];
      parentBlockHash: bigint | null;
    })
  | { type: 'BlockRemoved'; blockHashes: bigint[] };

/** What both trees export, as far as this benchmark uses it. */
interface RouterLike {
  applyEvents(replica: string, events: Event[], nowMs: number): number;
  applyForeignEvents(replica: string, events: Foreign[], nowMs: number): number;
  onReport(replica: string, report: object, nowMs: number): void;
  route(request: object, nowMs: number): unknown;
  onFirstToken(id: string, nowMs: number): boolean;
  onFinished(id: string, nowMs: number): boolean;
  /** A tree older than the call has none: its maps then grow as they fill. */
  reserveEngineBlocks?(replica: string, blocks: number): void;
}
interface Tree {
  Router: new (options: object) => RouterLike;
  computeBlockKeys(tokens: number[], blockSize: number): number[];
  toWireHash(key: number): bigint;
  Rng: new (seed: number) => { int(n: number): number };
}

async function load(src: string): Promise<Tree> {
  const keys = await import(resolve(src, 'kv/blockKey.ts'));
  const router = await import(resolve(src, 'router/index.ts'));
  const rng = await import(resolve(src, 'util/rng.ts'));
  return {
    Router: router.Router,
    computeBlockKeys: keys.computeBlockKeys,
    toWireHash: keys.toWireHash,
    Rng: rng.Rng,
  };
}

const trees = await loadSides(load);
const ref = trees.baseline;
const names = Array.from({ length: REPLICAS }, (_, i) => `replica-${i}`);
const rng = new ref.Rng(1);
const tokens = (count: number): number[] => {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(rng.int(VOCAB));
  return out;
};
const storedEvents = (toks: number[], keys: number[]): Stored[] => {
  const events: Stored[] = [];
  for (let b = 0; b < keys.length; b += BLOCKS_PER_EVENT) {
    const blockKeys = keys.slice(b, b + BLOCKS_PER_EVENT);
    events.push({
      type: 'BlockStored',
      blockKeys,
      parentKey: b === 0 ? null : keys[b - 1]!,
      tokenIds: toks.slice(b * BLOCK_SIZE, (b + blockKeys.length) * BLOCK_SIZE),
      blockSize: BLOCK_SIZE,
      loraName: null,
      cacheSalt: null,
    });
  }
  return events;
};

const stored: Stored[][] = names.map(() => []);
const prefixes: number[][] = [];
let blocks = 0;
for (let p = 0; p < PREFIXES; p++) {
  const toks = tokens(PREFIX_TOKENS);
  prefixes.push(toks);
  const keys = ref.computeBlockKeys(toks, BLOCK_SIZE);
  for (let o = 0; o < 2; o++) {
    stored[(p * 7 + o * 13) % REPLICAS]!.push(...storedEvents(toks, keys));
    blocks += keys.length;
  }
}
for (let c = 0; blocks < INDEXED_BLOCKS; c++) {
  const toks = tokens(Math.min(8_000, (INDEXED_BLOCKS - blocks) * BLOCK_SIZE));
  const keys = ref.computeBlockKeys(toks, BLOCK_SIZE);
  stored[c % REPLICAS]!.push(...storedEvents(toks, keys));
  blocks += keys.length;
}
const removals: Event[][] = stored.map((events) =>
  events
    .filter((_, i) => i % 4 === 3)
    .map((e) => ({ type: 'BlockRemoved', blockKeys: e.blockKeys })),
);
const putBack = stored.map((events) => events.filter((_, i) => i % 4 === 3));
const prompts = Array.from({ length: 2_000 }, () =>
  prefixes[rng.int(PREFIXES)]!.concat(tokens(UNIQUE_TOKENS)),
);
const toForeign = (events: Event[]): Foreign[] =>
  events.map((e) =>
    e.type === 'BlockStored'
      ? {
          type: 'BlockStored',
          blockHashes: e.blockKeys.map(ref.toWireHash),
          parentBlockHash: e.parentKey === null ? null : ref.toWireHash(e.parentKey),
          tokenIds: e.tokenIds,
          blockSize: e.blockSize,
          loraName: null,
          cacheSalt: null,
        }
      : { type: 'BlockRemoved', blockHashes: e.blockKeys.map(ref.toWireHash) },
  );
const foreignBatches = [
  stored.slice(0, FOREIGN_REPLICAS).map(toForeign),
  removals.slice(0, FOREIGN_REPLICAS).map(toForeign),
];
/** Each foreign replica's stored blocks: what the gateway reserves, its engine's pool at least. */
const foreignBlocks = stored
  .slice(0, FOREIGN_REPLICAS)
  .map((events) =>
    events.reduce((n, e) => n + (e.type === 'BlockStored' ? e.blockKeys.length : 0), 0),
  );

const cpuS = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

function applyAll(router: RouterLike, perReplica: Event[][]): number {
  let changed = 0;
  perReplica.forEach((events, r) => {
    for (let i = 0; i < events.length; i += EVENTS_PER_BATCH) {
      changed += router.applyEvents(names[r]!, events.slice(i, i + EVENTS_PER_BATCH), 0);
    }
  });
  return changed;
}

function round(tree: Tree, seed: number): Record<string, number> {
  const out: Record<string, number> = {};
  const router = new tree.Router({
    replicas: names,
    policy: 'cost',
    indexMode: 'events',
    expectedKeys: INDEXED_BLOCKS,
    seed,
  });
  let cpu = process.cpuUsage();
  let t0 = performance.now();
  const changed = applyAll(router, stored) + applyAll(router, removals);
  out.eventsPerS = changed / ((performance.now() - t0) / 1000);
  out.eventsPerCpuS = changed / cpuS(cpu);
  applyAll(router, putBack);

  const samples = new Float64Array(PICKS);
  let pickCpuS = 0;
  let nowMs = 0;
  let nextReportMs = 0;
  for (let i = 0; i < WARMUP_PICKS + PICKS; i++) {
    nowMs += 25;
    if (nowMs >= nextReportMs) {
      for (const name of names) {
        router.onReport(name, { kvUsage: 0.5, running: 8, waiting: 0 }, nowMs);
      }
      nextReportMs = nowMs + 100;
    }
    const toks = prompts[i % prompts.length]!;
    const id = `r${i}`;
    cpu = process.cpuUsage();
    const start = performance.now();
    const blockKeys = tree.computeBlockKeys(toks, BLOCK_SIZE);
    router.route({ id, blockKeys, promptTokens: toks.length, blockSize: BLOCK_SIZE }, nowMs);
    const end = performance.now();
    if (i >= WARMUP_PICKS) {
      pickCpuS += cpuS(cpu);
      samples[i - WARMUP_PICKS] = (end - start) * 1000;
    }
    router.onFirstToken(id, nowMs);
    router.onFinished(id, nowMs);
  }
  samples.sort();
  out.pickP50Us = samples[Math.floor(PICKS / 2)]!;
  out.pickCpuMeanUs = (pickCpuS / PICKS) * 1e6;

  const foreign = new tree.Router({ replicas: names.slice(0, FOREIGN_REPLICAS), seed });
  foreignBlocks.forEach((blocks, r) => {
    foreign.reserveEngineBlocks?.(names[r]!, blocks);
  });
  cpu = process.cpuUsage();
  t0 = performance.now();
  let foreignChanged = 0;
  for (const batches of foreignBatches) {
    batches.forEach((events, r) => {
      for (let i = 0; i < events.length; i += EVENTS_PER_BATCH) {
        const batch = events.slice(i, i + EVENTS_PER_BATCH);
        foreignChanged += foreign.applyForeignEvents(names[r]!, batch, 0);
      }
    });
  }
  out.foreignEventsPerS = foreignChanged / ((performance.now() - t0) / 1000);
  out.foreignEventsPerCpuS = foreignChanged / cpuS(cpu);
  return out;
}

// Baseline then current every round, as before the harness was shared.
const ab = await alternateRounds(
  ROUNDS,
  ['baseline', 'current'],
  (side, r) => round(trees[side], 100 + r),
  {
    swap: false,
  },
);
printAbTable(
  `router A/B: ${ROUNDS} alternating rounds, ${PICKS} picks each, medians`,
  summarize(ab, 'current', 'baseline'),
);
