/**
 * The cheapest fleet: every GPU x TP candidate of a grid gets a replica-count search (the same
 * search as `kvroute sim --search`, `parallel.ts`, on worker threads), is priced at its GPUs'
 * $/h, and the cheapest one meeting the SLO wins. A candidate that meets it at no searched count
 * names its limit (`fleetLimit.ts`); one whose TP the model does not fit on that GPU says so.
 *
 * With `pd`, every GPU x TP is two candidates: the aggregated fleet, then the disaggregated one,
 * whose P:D split comes from the split search of `kvroute sim --search --pd auto`
 * (`pd/runPd.ts`, its pools spared at twice the first estimate), priced at both pools' GPUs.
 *
 * Sharding: candidates are numbered in grid order (GPU-major) and shard i of n runs those whose
 * number is i mod n. A shard's part carries the search's header (everything that decides the
 * answer, and a fingerprint of the simulation config) and its candidates by number; merging n
 * parts with one header and every number once gives the candidates the unsharded search finds,
 * and so the same output bytes (a simulation is a pure function of its config).
 */
import { createHash } from 'node:crypto';
import { makeEngineConfig } from '../engine/options.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { decodeStepMs, kvPoolTokens, prefillUsPerToken } from '../model/cost.ts';
import type { SloTargets } from '../results/slo.ts';
import { arrivalsWithBestCache, diagnoseUnmet } from './feasibility.ts';
import { fleetLimit, type FleetLimit, workloadShape } from './fleetLimit.ts';
import { type BatchProgress, runBatch } from './parallel.ts';
import { runPdSearches } from './pd/searchMany.ts';
import { makeWorkload, type SimConfig } from './run.ts';
import type { PdSearchOutcome } from './workerPool.ts';

export interface FleetSearchHeader {
  workload: string;
  policy: string;
  model: string;
  gpus: string[];
  tps: number[];
  /** $/h of one GPU, by GPU name (the catalog's list price or --price). */
  dollarsPerGpuHour: Record<string, number>;
  slo: SloTargets;
  maxReplicas: number;
  /** sha256 of the simulation config the candidates share (all but GPU and TP). */
  fingerprint: string;
  /** Present when the grid holds P/D candidates too: the KV link they are simulated with. */
  pd?: FleetPdOptions;
}

export interface FleetPdOptions {
  transferGbps: number;
  transferLatencyMs: number;
}

/** A fleet's shape: one pool of aggregated replicas, or prefill and decode pools. */
export type FleetShape = 'aggregated' | 'disaggregated';

export interface FleetCandidate {
  gpu: string;
  tp: number;
  /** Only in a search with P/D candidates (`header.pd`). */
  shape?: FleetShape;
  /**
   * Only in a search with P/D candidates: a disaggregated candidate's split (null when none met
   * the SLO), null for an aggregated one.
   */
  pd?: { prefill: number; decode: number } | null;
  /**
   * Fewest replicas meeting the SLO (P/D: prefill + decode); null when none searched did (or the
   * TP does not fit).
   */
  replicas: number | null;
  gpuCount: number | null;
  dollarsPerHour: number | null;
  ttftP99Ms: number | null;
  tpotP99Ms: number | null;
  /** Prompt tokens found cached / prompt tokens; a P/D candidate's is its prefill pool's. */
  hitRate: number | null;
  /** Why no count met the SLO; 'does-not-fit' when the model does not fit this GPU at this TP. */
  limit: FleetLimit | { kind: 'does-not-fit'; detail: string } | null;
}

export interface FleetSearchResult {
  header: FleetSearchHeader;
  cheapest: FleetCandidate | null;
  candidates: FleetCandidate[];
}

/** One shard's part: the header, which slice, and its candidates by grid number. */
export interface FleetSearchPart {
  kind: 'kvroute-fleet-search-part';
  header: FleetSearchHeader;
  shard: { index: number; count: number };
  candidates: { number: number; candidate: FleetCandidate }[];
}

export interface FleetSearchSpec {
  /** Workload, seed, durations, router, SLO and engine options other than GPU and TP. */
  base: SimConfig;
  gpus: string[];
  tps: number[];
  dollarsPerGpuHour: Record<string, number>;
  maxReplicas: number;
  threads: number;
  shard?: { index: number; count: number };
  progress?: BatchProgress;
  /** Search P/D fleets too, with this KV link. */
  pd?: FleetPdOptions;
}

/** The grid in candidate order: GPU-major, TP-minor, then (with P/D) aggregated first. */
export const fleetGrid = (
  gpus: readonly string[],
  tps: readonly number[],
  pd = false,
): { gpu: string; tp: number; shape: FleetShape }[] =>
  gpus.flatMap((gpu) =>
    tps.flatMap((tp) =>
      (pd ? (['aggregated', 'disaggregated'] as const) : (['aggregated'] as const)).map(
        (shape) => ({ gpu, tp, shape }),
      ),
    ),
  );

export function fleetHeader(spec: FleetSearchSpec): FleetSearchHeader {
  const { base } = spec;
  const { gpu: _g, tp: _t, ...engine } = base.engine;
  const shared = {
    workload: base.workload,
    seed: base.seed,
    durationMs: base.durationMs,
    warmupMs: base.warmupMs,
    engine,
    router: base.router,
    view: base.view,
    slo: base.slo,
  };
  return {
    workload: base.workload.kind === 'trace' ? base.workload.path : base.workload.name,
    policy: base.router.policy,
    model: base.engine.model,
    gpus: spec.gpus,
    tps: spec.tps,
    dollarsPerGpuHour: Object.fromEntries(spec.gpus.map((g) => [g, spec.dollarsPerGpuHour[g]!])),
    slo: base.slo,
    maxReplicas: spec.maxReplicas,
    fingerprint: createHash('sha256').update(JSON.stringify(shared)).digest('hex'),
    ...(spec.pd && { pd: { ...spec.pd } }),
  };
}

/** Runs the search (or one shard of it): the candidates of this slice, by grid number. */
export async function runFleetSearch(spec: FleetSearchSpec): Promise<FleetSearchPart> {
  const header = fleetHeader(spec);
  const pd = header.pd !== undefined;
  const shard = spec.shard ?? { index: 0, count: 1 };
  const grid = fleetGrid(spec.gpus, spec.tps, pd)
    .map((cell, number) => ({ ...cell, number }))
    .filter((c) => c.number % shard.count === shard.index);
  const shape = grid.length > 0 ? workloadShape(spec.base) : null;
  const out: FleetSearchPart['candidates'] = [];
  const searched: Searched[] = [];
  const split: Searched[] = [];
  for (const cell of grid) {
    const config: SimConfig = {
      ...spec.base,
      engine: { ...spec.base.engine, gpu: cell.gpu, tp: cell.tp },
    };
    const problem = replicaSpecProblem(makeEngineConfig(config.engine).spec);
    const tagged = (c: FleetCandidate): FleetCandidate => (pd ? withShape(c, cell.shape) : c);
    if (problem) {
      out.push({ number: cell.number, candidate: tagged(unfit(cell.gpu, cell.tp, problem)) });
    } else {
      const s = { ...cell, config: { ...config, replicas: startReplicas(config) } };
      (cell.shape === 'aggregated' ? searched : split).push(s);
    }
  }
  out.push(...(await searchAggregated(spec, header, searched, shape)));
  if (header.pd) out.push(...(await searchSplit(spec, header, header.pd, split, shape!)));
  out.sort((a, b) => a.number - b.number);
  return { kind: 'kvroute-fleet-search-part', header, shard, candidates: out };
}

/** A candidate cell of the grid, with its config. */
type Searched = { number: number; gpu: string; tp: number; config: SimConfig };
type NumberedCandidates = FleetSearchPart['candidates'];

/** The aggregated cells: each the fewest replicas that meet the SLO, searched from its estimate. */
async function searchAggregated(
  spec: FleetSearchSpec,
  header: FleetSearchPart['header'],
  searched: Searched[],
  shape: ReturnType<typeof workloadShape> | null,
): Promise<NumberedCandidates> {
  const pd = header.pd !== undefined;
  const out: NumberedCandidates = [];
  const batch = await runBatch({
    runs: [],
    // Each search starts from its own estimate.
    searches: searched.map((s) => ({
      label: `${s.gpu} TP${s.tp}`,
      config: s.config,
      start: s.config.replicas,
    })),
    bounds: { start: 1, max: spec.maxReplicas },
    threads: spec.threads,
    ...(spec.progress && { progress: spec.progress }),
  });
  searched.forEach((s, i) => {
    const result = batch.search[i]!;
    const run = batch.answers[i] ?? null;
    const price = header.dollarsPerGpuHour[s.gpu]!;
    const replicas = result.minReplicas;
    const gpuCount = replicas === null ? null : replicas * s.tp;
    const candidate: FleetCandidate = {
      gpu: s.gpu,
      tp: s.tp,
      replicas,
      gpuCount,
      dollarsPerHour: gpuCount === null ? null : round(gpuCount * price, 2),
      ttftP99Ms: run === null ? null : round(run.ttftMs.p99, 1),
      tpotP99Ms: run === null ? null : round(run.tpotMs.p99, 1),
      hitRate: run?.hitRate == null ? null : round(run.hitRate, 4),
      limit: replicas === null ? fleetLimit(s.config, shape!, result.unmet) : null,
    };
    out.push({ number: s.number, candidate: pd ? withShape(candidate, 'aggregated') : candidate });
  });
  return out;
}

/** The disaggregated cells: prefill and decode replicas searched together over the KV link. */
async function searchSplit(
  spec: FleetSearchSpec,
  header: FleetSearchPart['header'],
  link: NonNullable<FleetSearchPart['header']['pd']>,
  split: Searched[],
  shape: ReturnType<typeof workloadShape>,
): Promise<NumberedCandidates> {
  const out: NumberedCandidates = [];
  // A limit of one replica (KV fit, TPOT floor, prefill floor) holds for every split too:
  // those candidates are not searched. Too few measured requests is said only when no split
  // met the SLO, as for an aggregated fleet.
  const limits = split.map((s) =>
    fleetLimit(s.config, shape, diagnoseUnmet(s.config, spec.maxReplicas)),
  );
  const proven = limits.map((l) => (PROVEN.has(l.kind) ? l : null));
  split.forEach((s, i) => {
    if (proven[i] === null) return;
    const none = noFleet(s.gpu, s.tp, proven[i]!);
    out.push({ number: s.number, candidate: withShape(none, 'disaggregated') });
  });
  const open = split.filter((_, i) => proven[i] === null);
  const found = await runPdSearches(
    open.map((s) => ({
      label: `${s.gpu} TP${s.tp}`,
      config: s.config,
      slo: s.config.slo,
      ...link,
      maxReplicas: spec.maxReplicas,
      spare: Math.max(2, 2 * s.config.replicas),
    })),
    spec.threads,
    spec.progress,
  );
  const openLimits = limits.filter((_, i) => proven[i] === null);
  open.forEach((s, i) => {
    const unmet =
      openLimits[i]!.kind === 'too-few-measured'
        ? openLimits[i]!
        : pdLimit(found[i]!.spare, spec.maxReplicas);
    out.push({ number: s.number, candidate: pdCandidate(s.config, header, found[i]!, unmet) });
  });
  return out;
}

/** `c` with its shape and split first after GPU and TP (the JSON's key order). */
function withShape(c: FleetCandidate, shape: FleetShape, split: FleetCandidate['pd'] = null) {
  const { gpu, tp, ...rest } = c;
  return { gpu, tp, shape, pd: split, ...rest };
}

function pdCandidate(
  config: SimConfig,
  header: FleetSearchHeader,
  found: PdSearchOutcome,
  unmet: FleetLimit,
): FleetCandidate {
  const tp = config.engine.tp!;
  const gpu = config.engine.gpu!;
  const run = found.run;
  const replicas = found.split === null ? null : found.split.prefill + found.split.decode;
  const gpuCount = replicas === null ? null : replicas * tp;
  const c: FleetCandidate = {
    gpu,
    tp,
    replicas,
    gpuCount,
    dollarsPerHour: gpuCount === null ? null : round(gpuCount * header.dollarsPerGpuHour[gpu]!, 2),
    ttftP99Ms: run === null ? null : round(run.ttftMs.p99, 1),
    tpotP99Ms: run === null ? null : round(run.tpotMs.p99, 1),
    hitRate: run === null ? null : round(run.prefillHitRate, 4),
    limit: found.split === null ? unmet : null,
  };
  return withShape(c, 'disaggregated', found.split);
}

/** The limits that no replica count or split gets past. */
const PROVEN: ReadonlySet<string> = new Set(['kv-fit', 'tpot-floor', 'prefill-floor']);

/** Why no P:D split met the SLO when no limit of one replica explains it: the search's pools. */
function pdLimit(spare: number, maxReplicas: number): FleetLimit {
  return {
    kind: 'max-replicas',
    detail: `no P:D split met it: each pool searched up to ${spare} replicas beside ${spare} of the other (twice the first estimate, at most half of --max-replicas ${maxReplicas})`,
  };
}

/** The answer from every part (one part: an unsharded search). Throws on parts that disagree. */
export function mergeFleetParts(parts: readonly FleetSearchPart[]): FleetSearchResult {
  if (parts.length === 0) throw new FleetMergeError('no parts to merge');
  const first = parts[0]!;
  const headerJson = JSON.stringify(first.header);
  const count = first.shard.count;
  const seen = new Set<number>();
  for (const p of parts) {
    if (JSON.stringify(p.header) !== headerJson) {
      throw new FleetMergeError(`shard ${p.shard.index}/${p.shard.count} is of another search`);
    }
    if (p.shard.count !== count) {
      throw new FleetMergeError(
        `shard ${p.shard.index}/${p.shard.count} is one of ${p.shard.count}, not ${count}`,
      );
    }
    if (seen.has(p.shard.index))
      throw new FleetMergeError(`shard ${p.shard.index}/${count} given twice`);
    seen.add(p.shard.index);
  }
  const missing = Array.from({ length: count }, (_, i) => i).filter((i) => !seen.has(i));
  if (missing.length > 0) {
    throw new FleetMergeError(
      `missing shard${missing.length > 1 ? 's' : ''} ${missing.map((i) => `${i}/${count}`).join(', ')}`,
    );
  }
  const cells = fleetGrid(
    first.header.gpus,
    first.header.tps,
    first.header.pd !== undefined,
  ).length;
  const byNumber = new Map<number, FleetCandidate>();
  for (const p of parts) for (const c of p.candidates) byNumber.set(c.number, c.candidate);
  if (byNumber.size !== cells) {
    throw new FleetMergeError(`the parts hold ${byNumber.size} of the grid's ${cells} candidates`);
  }
  const candidates = Array.from({ length: cells }, (_, i) => byNumber.get(i)!);
  return { header: first.header, cheapest: cheapestOf(candidates), candidates };
}

export class FleetMergeError extends Error {
  readonly code = 'ERR_FLEET_MERGE';
}

/** Cheapest $/h meeting the SLO; ties to fewer GPUs, then grid order. */
export function cheapestOf(candidates: readonly FleetCandidate[]): FleetCandidate | null {
  let best: FleetCandidate | null = null;
  for (const c of candidates) {
    if (c.dollarsPerHour === null) continue;
    if (
      best === null ||
      c.dollarsPerHour < best.dollarsPerHour! ||
      (c.dollarsPerHour === best.dollarsPerHour && c.gpuCount! < best.gpuCount!)
    ) {
      best = c;
    }
  }
  return best;
}

function unfit(gpu: string, tp: number, problem: string): FleetCandidate {
  const detail = problem.replace(/^--tp \d+ /, `TP ${tp} `);
  return noFleet(gpu, tp, { kind: 'does-not-fit', detail });
}

/** A candidate that meets the SLO at no size, for `limit`. */
function noFleet(gpu: string, tp: number, limit: FleetCandidate['limit']): FleetCandidate {
  return {
    gpu,
    tp,
    replicas: null,
    gpuCount: null,
    dollarsPerHour: null,
    ttftP99Ms: null,
    tpotP99Ms: null,
    hitRate: null,
    limit,
  };
}

/** Planning utilization of the first guess (the router seed's 65 %). */
const START_UTILIZATION = 0.65;

/**
 * The search's first count: the workload's replica-seconds per second at this GPU and TP over
 * the planning utilization. Each request costs its prefill, less the blocks an earlier request
 * brought (the best any router does), plus its share of decode steps at the engine's batch.
 */
export function startReplicas(config: SimConfig): number {
  const engine = makeEngineConfig(config.engine);
  const spec = engine.spec;
  const workload = makeWorkload(config);
  const usPerToken = prefillUsPerToken(spec, engine.budgetTokens);
  const batch = engine.maxSeqs;
  let replicaMs = 0;
  let lastMs = 0;
  for (const { arrival, cachedBlocks } of arrivalsWithBestCache(workload)) {
    const uncached = arrival.promptLength - cachedBlocks * workload.blockSize;
    const context = arrival.promptLength + arrival.outputTokens / 2;
    replicaMs +=
      (uncached * usPerToken) / 1000 +
      (arrival.outputTokens * decodeStepMs(spec, batch, context)) / batch;
    lastMs = arrival.atMs;
  }
  const pool = kvPoolTokens(spec);
  if (lastMs <= 0 || pool < 1) return 1;
  return Math.max(1, Math.ceil(replicaMs / lastMs / START_UTILIZATION));
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;
