/**
 * The figures of `npm run bench:real` from what its runs recorded: pure functions (no clock, no
 * I/O), so test/bench/bench.real.test.ts checks them on canned records.
 */
import { percentile } from '../src/results/stats.ts';

const sortedCopy = (xs: readonly number[]): Float64Array => Float64Array.from(xs).sort();
const p = (xs: readonly number[], q: number): number => percentile(sortedCopy(xs), q);
const round = (x: number, digits = 1): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/** One conversation: its second turn's TTFT, and a cold prompt's of the same length. */
export interface WarmColdSample {
  warmTtftMs: number;
  coldTtftMs: number;
  /** Cached tokens the second turn reported (null: not reported). */
  warmCachedTokens: number | null;
  promptTokens: number;
}

export interface WarmColdFigure {
  warmTtftMs: { p50: number; count: number };
  coldTtftMs: { p50: number; count: number };
  /** warm p50 / cold p50. */
  ratio: number;
  /** Median cached tokens of the second turns. */
  warmCachedTokensP50: number | null;
  promptTokens: number;
  /** The target: warm at most 0.5 x cold. */
  met: boolean;
}

export function warmColdFigure(samples: readonly WarmColdSample[]): WarmColdFigure {
  if (samples.length === 0) throw new Error('warm/cold: no samples');
  const warm = p(
    samples.map((s) => s.warmTtftMs),
    0.5,
  );
  const cold = p(
    samples.map((s) => s.coldTtftMs),
    0.5,
  );
  const cached = samples.map((s) => s.warmCachedTokens).filter((c): c is number => c !== null);
  return {
    warmTtftMs: { p50: round(warm), count: samples.length },
    coldTtftMs: { p50: round(cold), count: samples.length },
    ratio: round(warm / cold, 3),
    warmCachedTokensP50: cached.length > 0 ? p(cached, 0.5) : null,
    promptTokens: samples[0]!.promptTokens,
    met: warm <= 0.5 * cold,
  };
}

/**
 * The inter-token gaps of streams already decoding that overlap (fromMs, toMs), the window in
 * which long prompts arrive and prefill: each gap is the step, or steps, a stream waited.
 */
export function gapsInWindow(
  streams: readonly (readonly number[])[],
  fromMs: number,
  toMs: number,
): number[] {
  const gaps: number[] = [];
  for (const times of streams) {
    for (let i = 1; i < times.length; i++) {
      if (times[i]! > fromMs && times[i - 1]! < toMs) gaps.push(times[i]! - times[i - 1]!);
    }
  }
  return gaps;
}

export interface StallRun {
  budget: number;
  /** Gaps of the running streams while the long prompts arrived (gapsInWindow). */
  gapsMs: number[];
  /** The long prompts' TTFTs. */
  longTtftMs: number[];
  longPromptTokens: number;
}

export interface StallFigure {
  budgets: number[];
  /** p99 of the running streams' inter-token gaps while the long prompts arrived, per budget. */
  runningTpotP99Ms: number[];
  longTtftP50Ms: number[];
  gaps: number[];
  longPromptTokens: number;
  /** The scheduler seed's claim: the small budget bounds the stall below the large one's. */
  met: boolean;
}

export function stallFigure(runs: readonly StallRun[]): StallFigure {
  const sorted = [...runs].sort((a, b) => a.budget - b.budget);
  for (const r of sorted) {
    if (r.gapsMs.length === 0) throw new Error(`stall: no gaps at budget ${r.budget}`);
  }
  const p99s = sorted.map((r) => p(r.gapsMs, 0.99));
  return {
    budgets: sorted.map((r) => r.budget),
    runningTpotP99Ms: p99s.map((x) => round(x)),
    longTtftP50Ms: sorted.map((r) => round(p(r.longTtftMs, 0.5))),
    gaps: sorted.map((r) => r.gapsMs.length),
    longPromptTokens: sorted[0]!.longPromptTokens,
    met: p99s.length >= 2 && p99s[0]! < p99s[p99s.length - 1]!,
  };
}

/** A live run's figures, as `kvroute bench --json` has them. */
export interface RunFigures {
  ttftP50Ms: number;
  ttftP99Ms: number;
  hitRate: number | null;
  completed: number;
  errors: number;
}

export interface RoutingFigure {
  'delay-cost': { ttftP99Ms: number; hitRate: number | null };
  random: { ttftP99Ms: number; hitRate: number | null };
  /** delay-cost's TTFT p99 below random's. */
  met: boolean;
}

export function routingFigure(delayCost: RunFigures, random: RunFigures): RoutingFigure {
  const row = (r: RunFigures) => ({
    ttftP99Ms: round(r.ttftP99Ms),
    hitRate: r.hitRate === null ? null : round(r.hitRate, 3),
  });
  return {
    'delay-cost': row(delayCost),
    random: row(random),
    met: delayCost.ttftP99Ms < random.ttftP99Ms,
  };
}

export interface FidelityFigure {
  /** (simulated - live) / live, percent. */
  ttftP50ErrPct: number;
  ttftP99ErrPct: number;
  live: { ttftP50Ms: number; ttftP99Ms: number };
  sim: { ttftP50Ms: number; ttftP99Ms: number };
  /** The profile's per-request overhead, ms: part of every simulated TTFT (the sim hands off so late). */
  requestOverheadMs: number;
  /** Both raw errors within the target. */
  met: boolean;
  targetPct: number;
}

const errPct = (sim: number, live: number): number => ((sim - live) / live) * 100;

export function fidelityFigure(
  live: { ttftP50Ms: number; ttftP99Ms: number },
  sim: { ttftP50Ms: number; ttftP99Ms: number },
  requestOverheadMs: number,
  targetPct = 15,
): FidelityFigure {
  const p50 = errPct(sim.ttftP50Ms, live.ttftP50Ms);
  const p99 = errPct(sim.ttftP99Ms, live.ttftP99Ms);
  return {
    ttftP50ErrPct: round(p50),
    ttftP99ErrPct: round(p99),
    live: { ttftP50Ms: round(live.ttftP50Ms), ttftP99Ms: round(live.ttftP99Ms) },
    sim: { ttftP50Ms: round(sim.ttftP50Ms), ttftP99Ms: round(sim.ttftP99Ms) },
    requestOverheadMs: round(requestOverheadMs, 2),
    met: Math.abs(p50) <= targetPct && Math.abs(p99) <= targetPct,
    targetPct,
  };
}

/**
 * Several fidelity runs as one figure: the median of each error over the runs (the figure is
 * judged on those), each run's figure kept beside it. A run on this shared host can meet a slow
 * or fast minute that the calibration did not (its steps move 2x within seconds), so one run
 * says little either way.
 */
export function fidelityOverRuns<T extends FidelityFigure>(
  runs: readonly T[],
): FidelityFigure & { runs: T[] } {
  if (runs.length === 0) throw new Error('no fidelity runs');
  const median = (xs: number[]): number => {
    const s = sortedCopy(xs);
    const mid = s.length >> 1;
    return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  };
  const p50 = median(runs.map((r) => r.ttftP50ErrPct));
  const p99 = median(runs.map((r) => r.ttftP99ErrPct));
  const targetPct = runs[0]!.targetPct;
  return {
    ttftP50ErrPct: round(p50),
    ttftP99ErrPct: round(p99),
    live: {
      ttftP50Ms: round(median(runs.map((r) => r.live.ttftP50Ms))),
      ttftP99Ms: round(median(runs.map((r) => r.live.ttftP99Ms))),
    },
    sim: {
      ttftP50Ms: round(median(runs.map((r) => r.sim.ttftP50Ms))),
      ttftP99Ms: round(median(runs.map((r) => r.sim.ttftP99Ms))),
    },
    requestOverheadMs: round(median(runs.map((r) => r.requestOverheadMs)), 2),
    met: Math.abs(p50) <= targetPct && Math.abs(p99) <= targetPct,
    targetPct,
    runs: [...runs],
  };
}

/** Figures out of a `kvroute bench --json` or `kvroute sim --json` result object. */
export function runFigures(result: {
  ttftMs: { p50: number; p99: number };
  hitRate: number | null;
  completed: number;
  errors: number;
}): RunFigures {
  return {
    ttftP50Ms: result.ttftMs.p50,
    ttftP99Ms: result.ttftMs.p99,
    hitRate: result.hitRate,
    completed: result.completed,
    errors: result.errors,
  };
}

/** The parts `--only` may name. */
export const REAL_PARTS = ['fidelity'] as const;
export type RealPart = (typeof REAL_PARTS)[number];

export interface RealArgs {
  json: boolean;
  quick: boolean;
  runtime: 'llama.cpp' | 'sim';
  /** null: every figure. */
  only: RealPart | null;
  /** Requests of the fidelity trace; null: the size's own (24, 16 with --quick). */
  fidelityRequests: number | null;
  /** Fidelity runs (each calibrates a fresh engine again); the figure is their median. */
  fidelityRuns: number;
}

/** bench:real's flags, or the one error line naming the flag and what it accepts. */
export function parseRealArgs(argv: readonly string[]): RealArgs | string {
  const out: RealArgs = {
    json: false,
    quick: false,
    runtime: 'llama.cpp',
    only: null,
    fidelityRequests: null,
    fidelityRuns: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--json') out.json = true;
    else if (a === '--quick') out.quick = true;
    else if (a === '--runtime') {
      const v = argv[++i];
      if (v !== 'llama.cpp' && v !== 'sim') {
        return `--runtime must be llama.cpp or sim, got '${v ?? ''}'`;
      }
      out.runtime = v;
    } else if (a === '--only') {
      const v = argv[++i];
      if (!REAL_PARTS.includes(v as RealPart)) {
        return `--only must be one of ${REAL_PARTS.join(', ')}, got '${v ?? ''}'`;
      }
      out.only = v as RealPart;
    } else if (a === '--fidelity-requests' || a === '--fidelity-runs') {
      const v = argv[++i];
      const n = Number(v);
      const [lo, hi] = a === '--fidelity-requests' ? [4, 1000] : [1, 9];
      if (!Number.isInteger(n) || n < lo! || n > hi!) {
        return `${a} must be an integer from ${lo} to ${hi}, got '${v ?? ''}'`;
      }
      if (a === '--fidelity-requests') out.fidelityRequests = n;
      else out.fidelityRuns = n;
    } else {
      return `unknown flag '${a}': bench:real takes --json, --quick, --runtime llama.cpp|sim, --only ${REAL_PARTS.join('|')}, --fidelity-requests N, --fidelity-runs N`;
    }
  }
  return out;
}

/** The host's CPU ticks from /proc/stat's `cpu` line: all of them, and those stolen by the hypervisor. */
export interface CpuTicks {
  total: number;
  steal: number;
}

/** The `cpu` line of a /proc/stat text; null where it has none (not Linux). */
export function cpuTicksOf(procStat: string): CpuTicks | null {
  const line = procStat.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return null;
  // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is in user.
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return null;
  return { total: f.reduce((a, b) => a + b, 0), steal: f[7]! };
}

/**
 * Percent of the host's CPU time the hypervisor took between two readings: a real engine's
 * step slows with it, and no cost model can know it (null when unknown or nothing elapsed).
 */
export function stealPct(before: CpuTicks | null, after: CpuTicks | null): number | null {
  if (before === null || after === null || after.total <= before.total) return null;
  return round(((after.steal - before.steal) / (after.total - before.total)) * 100);
}
