/**
 * `kvroute sim --pd P:D` and `--search --pd auto`: one disaggregated run (pdFleet.ts) summarized
 * like an aggregated one, and the fewest GPUs meeting the SLO for the aggregated fleet
 * (`simulate`, the usual fleet) and for P:D splits.
 *
 * The split search: the prefill pool sets TTFT (queue + prefill + link) and the decode pool
 * sets TPOT, so it finds the fewest prefill replicas meeting the TTFT target with decode
 * replicas to spare, the fewest decode replicas meeting the TPOT target with prefill replicas to
 * spare, then checks that pair and grows whichever pool misses until both are met (bounded by
 * `maxReplicas`): a TPOT miss grows the decode pool, and so does a TTFT miss whose prefill and
 * link part fits the target (pulled requests waiting for room on full decode replicas); any
 * other TTFT miss grows the prefill pool. Every run is deterministic in its seed.
 */
import { makeEngineConfig } from '../../engine/options.ts';
import { DEFAULT_KV_THRESHOLD } from '../../router/defaults.ts';
import { meetsSlo, type SloTargets } from '../../results/slo.ts';
import { type Percentiles, summarize } from '../../results/stats.ts';
import { makeSimRouter } from '../routerAdapter.ts';
import { makeWorkload, type SimConfig, simulate } from '../run.ts';
import { PdFleet } from './pdFleet.ts';

export interface PdRunOptions {
  prefill: number;
  decode: number;
  transferGbps: number;
  transferLatencyMs: number;
}

export interface PdRunResult {
  prefill: number;
  decode: number;
  gpus: number;
  transferGbps: number;
  arrived: number;
  completed: number;
  errors: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  transferMs: Percentiles;
  /** TTFT's parts: arrival to the prefill's end; the pull's landing to the decode's first token. */
  prefillMs: Percentiles;
  decodeFirstMs: Percentiles;
  /** Prompt tokens cached on the prefill pool / prompt tokens (measured requests). */
  prefillHitRate: number;
  /** The P/D ledger at the end: blocks held by prefillers and waiting on decoders (0). */
  heldBlocks: number;
  injectedBlocks: number;
}

export function simulatePd(config: SimConfig, pd: PdRunOptions): PdRunResult {
  const workload = makeWorkload(config);
  const engine = { ...makeEngineConfig(config.engine), kvTransfer: {} };
  const router = makeSimRouter({ ...config, replicas: pd.prefill });
  const out = new PdFleet({
    prefill: pd.prefill,
    decode: pd.decode,
    workload,
    engine,
    router,
    transferGbps: pd.transferGbps,
    transferLatencyMs: pd.transferLatencyMs,
    kvThreshold: config.router.kvThreshold ?? DEFAULT_KV_THRESHOLD,
    warmupMs: config.warmupMs,
    // An overloaded split never drains in time: give up at three times the arrivals' span.
    ...(config.durationMs !== undefined && { horizonMs: config.durationMs * 3 }),
  }).run();
  const s = out.samples;
  const prompt = s.reduce((a, x) => a + x.promptTokens, 0);
  const cached = s.reduce((a, x) => a + x.prefillCachedTokens, 0);
  return {
    prefill: pd.prefill,
    decode: pd.decode,
    gpus: (pd.prefill + pd.decode) * engine.spec.tp,
    transferGbps: pd.transferGbps,
    arrived: out.arrived,
    completed: out.completed,
    errors: out.arrived - out.completed,
    ttftMs: summarize(s.map((x) => x.ttftMs)),
    tpotMs: summarize(s.map((x) => x.tpotMs).filter((x) => !Number.isNaN(x))),
    transferMs: summarize(s.map((x) => x.transferMs)),
    prefillMs: summarize(s.map((x) => x.prefillMs)),
    decodeFirstMs: summarize(s.map((x) => x.decodeFirstMs)),
    prefillHitRate: prompt > 0 ? cached / prompt : 0,
    heldBlocks: out.heldBlocks,
    injectedBlocks: out.injectedBlocks,
  };
}

export interface PdSearchResult {
  slo: SloTargets;
  transferGbps: number;
  aggregated: { replicas: number; gpus: number } | null;
  disaggregated: { prefill: number; decode: number; gpus: number } | null;
  /** Runs made. */
  probes: number;
}

const ttftMet = (r: PdRunResult, slo: SloTargets) =>
  r.errors === 0 && r.ttftMs.p99 <= (slo.ttftP99Ms ?? Number.POSITIVE_INFINITY);
const tpotMet = (r: PdRunResult, slo: SloTargets) =>
  r.errors === 0 && (r.tpotMs.count === 0 || r.tpotMs.p99 <= slo.tpotP99Ms);

/** Smallest n in [lo, hi] with ok(n), by bisection (ok monotone); null when hi fails. */
function smallest(lo: number, hi: number, ok: (n: number) => boolean): number | null {
  if (!ok(hi)) return null;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (ok(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Searches for several SLOs on one config and link share their runs: a run's latencies do not
 * depend on the SLO it is judged by.
 */
export class PdSearcher {
  readonly #config: SimConfig;
  readonly #o: PdSearchOptions;
  readonly #pd = new Map<string, PdRunResult>();
  readonly #agg = new Map<number, ReturnType<typeof simulate>>();
  probes = 0;

  constructor(config: SimConfig, o: PdSearchOptions) {
    this.#config = config;
    this.#o = o;
  }

  pdRun(prefill: number, decode: number): PdRunResult {
    const key = `${prefill}:${decode}`;
    let r = this.#pd.get(key);
    if (!r) {
      this.probes++;
      this.#o.onProbe?.(this.probes, key);
      r = simulatePd(this.#config, {
        prefill,
        decode,
        transferGbps: this.#o.transferGbps,
        transferLatencyMs: this.#o.transferLatencyMs,
      });
      this.#pd.set(key, r);
    }
    return r;
  }

  aggregatedRun(replicas: number): ReturnType<typeof simulate> {
    let r = this.#agg.get(replicas);
    if (!r) {
      this.probes++;
      r = simulate({ ...this.#config, replicas });
      this.#agg.set(replicas, r);
    }
    return r;
  }

  search(slo: SloTargets): PdSearchResult {
    const tp = makeEngineConfig(this.#config.engine).spec.tp;
    const max = this.#o.maxReplicas;
    const aggregatedN = smallest(1, max, (n) => meetsSlo(this.aggregatedRun(n), slo));
    const split = this.searchDisaggregated(slo).split;
    return {
      slo,
      transferGbps: this.#o.transferGbps,
      aggregated: aggregatedN === null ? null : { replicas: aggregatedN, gpus: aggregatedN * tp },
      disaggregated: split && { ...split, gpus: (split.prefill + split.decode) * tp },
      probes: this.probes,
    };
  }

  /**
   * The split search alone: the fewest prefill replicas meeting TTFT beside a spare decode pool,
   * the fewest decode replicas meeting TPOT beside a spare prefill pool, then that pair grown
   * until both are met, within `maxReplicas` in all. `run`: the answer's run.
   */
  searchDisaggregated(slo: SloTargets): {
    split: { prefill: number; decode: number } | null;
    run: PdRunResult | null;
    /** Replicas of the pool kept to spare while the other is sized. */
    spare: number;
  } {
    const max = this.#o.maxReplicas;
    // Pools to spare while sizing the other: half the limit each, or the caller's.
    const spare = Math.min(Math.max(1, Math.floor(max / 2)), this.#o.spare ?? max);
    const minP = smallest(1, spare, (p) => ttftMet(this.pdRun(p, spare), slo));
    const minD = smallest(1, spare, (d) => tpotMet(this.pdRun(spare, d), slo));
    if (minP !== null && minD !== null) {
      let p = minP;
      let d = minD;
      while (p + d <= max) {
        const r = this.pdRun(p, d);
        if (ttftMet(r, slo) && tpotMet(r, slo))
          return { split: { prefill: p, decode: d }, run: r, spare };
        // A TTFT miss is the prefill pool's unless its part (prefill and link) fits the target:
        // then pulled requests wait for room on full decode replicas.
        const prefillSide = r.prefillMs.p99 + r.transferMs.p99 > (slo.ttftP99Ms ?? Infinity);
        if (!ttftMet(r, slo) && prefillSide) p++;
        else d++;
      }
    }
    return { split: null, run: null, spare };
  }
}

export interface PdSearchOptions {
  transferGbps: number;
  transferLatencyMs: number;
  /** Replicas in all, both pools together. */
  maxReplicas: number;
  /** The spare pool's size while the other is sized (default and most: maxReplicas / 2). */
  spare?: number;
  /** Before each new P/D run: runs made so far (this one included) and its split, "P:D". */
  onProbe?: (probes: number, split: string) => void;
}

/**
 * About how many P/D runs a split search makes (for progress): the spare pair, two bisections
 * over 1..spare, and a couple of growth steps.
 */
export function expectedPdProbes(o: Pick<PdSearchOptions, 'maxReplicas' | 'spare'>): number {
  const spare = Math.min(Math.max(1, Math.floor(o.maxReplicas / 2)), o.spare ?? o.maxReplicas);
  return 3 + 2 * Math.ceil(Math.log2(Math.max(1, spare)));
}

export function searchPd(config: SimConfig, slo: SloTargets, o: PdSearchOptions): PdSearchResult {
  return new PdSearcher(config, o).search(slo);
}
