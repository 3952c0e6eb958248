/**
 * A CLI's simulations, serially or on worker threads, with the same results: the runs at a fixed
 * replica count and the replica searches, one per policy.
 *
 * In parallel, every simulation is a task on `SimPool`. A search is replayed from its decided
 * probes (`planSearch`) each time one completes, so it asks for exactly the counts the serial
 * search asks for, in the same order. Workers with nothing needed to run probe the counts a search
 * may ask next, under each outcome of the probes still running (up to SPECULATE_DEPTH deep);
 * a speculative probe whose premise turned out false is cancelled. A search's result lists only
 * the probes its replay used, so speculation changes how soon the answer comes, never the answer.
 * Needed search probes run first (a search is a chain of them), then the fixed runs, then
 * speculation.
 */
import type { RequestRecord } from '../results/requestRecord.ts';
import type { SearchResult, SearchUnmet, SimulatedRun } from '../results/result.ts';
import { diagnoseUnmet } from './feasibility.ts';
import { type SimConfig, simulate } from './run.ts';
import { provenUnmet, searchMinReplicas, searchResult } from './search.ts';
import { probesLeft } from './searchLeft.ts';
import { type SearchBounds, planSearch } from './searchPlan.ts';
import { SimPool, type TaskOutcome } from './workerPool.ts';

/** How many undecided probes deep a search's next counts are guessed. */
export const SPECULATE_DEPTH = 3;

export interface SearchSpec {
  /** The search's name in its result (the policy, or POLICY/lora-blind). */
  label: string;
  /** The probes' config: replicas, faults past the count and early stop are set per probe. */
  config: SimConfig;
  /** This search's first count (default: the batch's `bounds.start`). */
  start?: number;
}

/** A search's bounds: the batch's, from its own first count when it has one. */
const searchBounds = (bounds: SearchBounds, s: SearchSpec): SearchBounds =>
  s.start === undefined ? bounds : { ...bounds, start: s.start };

/** Where a batch says how far it is (`src/cli/progress.ts`'s `Progress` fits). */
export interface BatchProgress {
  phase(label: string, opts?: BatchPhase): void;
  /** New options (a new estimate of its total) and label for the phase, which keeps its counts. */
  revise(opts: BatchPhase, label?: string): void;
  task(label: string): { update(fraction: number, detail?: string): void; end(): void };
}

export interface BatchPhase {
  total?: number;
  unit?: string;
  of?: string;
  /** `total` is an estimate (probes still to come). */
  estimated?: boolean;
  detail?: string;
}

export interface BatchSpec {
  /** Runs at their own replica count, in result order. */
  runs: SimConfig[];
  /** Run labels for progress. */
  runLabels?: string[];
  searches: SearchSpec[];
  bounds: SearchBounds;
  /** Worker threads; 1 runs everything in this thread. */
  threads: number;
  progress?: BatchProgress;
  /** Every request of fixed run `run`, as it ends; the runs then stay in this thread. */
  onRequest?: (run: number, r: RequestRecord) => void;
}

export interface BatchResult {
  results: SimulatedRun[];
  search: SearchResult[];
  /** Each search's run at its answer (the fewest replicas meeting the SLO); null when none did. */
  answers: (SimulatedRun | null)[];
  /** Simulations started, and of those the ones cancelled (speculative probes not needed). */
  work: { simulations: number; cancelled: number };
}

/** A search probe: `replicas`, the faults that still name a replica, early stop on. */
export function probeConfig(base: SimConfig, replicas: number): SimConfig {
  return {
    ...base,
    replicas,
    faults: base.faults.filter((f) => f.replica < replicas),
    earlyStop: true,
  };
}

export async function runBatch(spec: BatchSpec): Promise<BatchResult> {
  if (spec.onRequest !== undefined && spec.runs.length > 0) {
    // A callback cannot cross to a worker: the recorded runs go first, here, then the searches.
    const fixed = runSerial({ ...spec, searches: [] });
    if (spec.searches.length === 0) return fixed;
    const rest = await runBatch({ ...spec, runs: [], onRequest: undefined });
    return {
      results: fixed.results,
      search: rest.search,
      answers: rest.answers,
      work: {
        simulations: fixed.work.simulations + rest.work.simulations,
        cancelled: rest.work.cancelled,
      },
    };
  }
  const tasks = spec.runs.length + spec.searches.length;
  const threads = Math.min(spec.threads, spec.runs.length + spec.searches.length * 8);
  if (threads <= 1 || tasks <= 1) return runSerial(spec);
  return new ParallelBatch(spec, threads).run();
}

/** Why nothing met the SLO: once per workload, shared by every search on it. */
function makeDiagnose(bounds: SearchBounds): (config: SimConfig) => SearchUnmet {
  const known = new Map<string, SearchUnmet>();
  return (config) => {
    const { workload, seed, durationMs, warmupMs, engine, slo } = config;
    const key = JSON.stringify({ workload, seed, durationMs, warmupMs, engine, slo });
    let unmet = known.get(key);
    if (unmet === undefined) known.set(key, (unmet = diagnoseUnmet(config, bounds.max)));
    return unmet;
  };
}

function runSerial(spec: BatchSpec): BatchResult {
  const diagnose = makeDiagnose(spec.bounds);
  const { progress, onRequest } = spec;
  /** Runs `config` as a progress task. */
  const simulateTask = (label: string, config: SimConfig): SimulatedRun => {
    const task = progress?.task(label);
    const run = simulate(task ? { ...config, onProgress: (f) => task.update(f) } : config);
    task?.end();
    return run;
  };
  progress?.phase('runs', { total: spec.runs.length, unit: 'runs', of: 'simulated time' });
  const results = spec.runs.map((config, i) =>
    simulateTask(spec.runLabels?.[i] ?? config.router.policy, {
      ...config,
      ...(onRequest && { onRequest: (r: RequestRecord) => onRequest(i, r) }),
    }),
  );
  let simulations = spec.runs.length;
  // One phase for all the searches, so that its estimate covers the ones still to come.
  const searches = spec.searches.length;
  const fresh = Math.round(probesLeft(spec.bounds, () => undefined).expected);
  let probed = 0;
  const estimate = (
    i: number,
    bounds: SearchBounds,
    met: Map<number, boolean | undefined>,
  ): BatchPhase => ({
    total:
      probed +
      Math.round(probesLeft(bounds, (n) => met.get(n)).expected) +
      (searches - i - 1) * fresh,
    estimated: true,
    detail: `policy ${i + 1}/${searches}`,
  });
  if (searches > 0) progress?.phase('search', { unit: 'probes', of: 'simulated time' });
  const answers: (SimulatedRun | null)[] = [];
  const search = spec.searches.map((s, i) => {
    const met = new Map<number, boolean | undefined>();
    const bounds = searchBounds(spec.bounds, s);
    progress?.revise(estimate(i, bounds, met), `search ${s.label}`);
    const runs = new Map<number, SimulatedRun>();
    const result = searchMinReplicas(s.label, {
      ...bounds,
      probe: (n) => {
        simulations++;
        const run = simulateTask(`${n} replicas`, probeConfig(s.config, n));
        runs.set(n, run);
        probed++;
        met.set(n, run.sloMet);
        progress?.revise(estimate(i, bounds, met));
        return run;
      },
      diagnose: () => diagnose(s.config),
      slo: s.config.slo,
    });
    answers.push(result.minReplicas === null ? null : (runs.get(result.minReplicas) ?? null));
    return result;
  });
  return { results, search, answers, work: { simulations, cancelled: 0 } };
}

interface SearchState {
  spec: SearchSpec;
  runs: Map<number, SimulatedRun>;
  /** Probes running: count -> task id. */
  running: Map<number, number>;
  result: SearchResult | null;
  /** Asked whether the SLO is out of reach before its first probe. */
  checked: boolean;
}

type Completion =
  | { kind: 'run'; index: number; outcome: TaskOutcome }
  | { kind: 'probe'; search: SearchState; replicas: number; outcome: TaskOutcome }
  | { kind: 'error'; error: unknown };

class ParallelBatch {
  readonly #spec: BatchSpec;
  readonly #pool: SimPool;
  readonly #diagnose: (config: SimConfig) => SearchUnmet;
  readonly #results: (SimulatedRun | undefined)[];
  readonly #searches: SearchState[];
  readonly #completions: Completion[] = [];
  #wake: (() => void) | null = null;
  #nextRun = 0;
  #running = 0;
  #started = 0;
  #cancelled = 0;

  constructor(spec: BatchSpec, threads: number) {
    this.#spec = spec;
    this.#pool = new SimPool(threads);
    this.#diagnose = makeDiagnose(spec.bounds);
    this.#results = new Array(spec.runs.length);
    this.#searches = spec.searches.map((s) => ({
      spec: s,
      runs: new Map(),
      running: new Map(),
      result: null,
      checked: false,
    }));
  }

  async run(): Promise<BatchResult> {
    // A simulation shows as a task from its start to its end, with the worker's fractions.
    this.#spec.progress?.phase(`runs and searches on ${this.#pool.threads} threads`, {
      unit: 'simulations',
      of: 'simulated time',
      estimated: true,
      ...this.#estimate(),
    });
    try {
      // The fixed runs start while this thread asks whether each search can succeed at all.
      this.#fill();
      for (const s of this.#searches) {
        const proven = provenUnmet(s.spec.config.slo, () => this.#diagnose(s.spec.config));
        const none = { minReplicas: null, misses: [], probed: [] };
        if (proven) s.result = searchResult(s.spec.label, none, s.runs, proven);
        s.checked = true;
      }
      for (;;) {
        this.#fill();
        this.#spec.progress?.revise(this.#estimate());
        if (this.#running === 0) break;
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
          if (this.#completions.length > 0) resolve();
        });
        this.#wake = null;
        for (let c = this.#completions.shift(); c !== undefined; c = this.#completions.shift()) {
          this.#complete(c);
        }
      }
    } finally {
      await this.#pool.close();
    }
    return {
      results: this.#results as SimulatedRun[],
      search: this.#searches.map((s) => s.result!),
      answers: this.#searches.map((s) => {
        const n = s.result!.minReplicas;
        return n === null ? null : (s.runs.get(n) ?? null);
      }),
      work: { simulations: this.#started, cancelled: this.#cancelled },
    };
  }

  /** Starts tasks while workers are idle: needed probes, fixed runs, then speculation. */
  #fill(): void {
    while (this.#pool.idle > 0) {
      const next = this.#nextTask();
      if (next === null) return;
      this.#start(next);
    }
  }

  #nextTask(): { search: SearchState; replicas: number } | { run: number } | null {
    let best: { search: SearchState; replicas: number; depth: number } | null = null;
    for (const s of this.#searches) {
      if (s.result !== null || !s.checked) continue;
      for (const [replicas, depth] of this.#explore(s).candidates) {
        if (
          best === null ||
          depth < best.depth ||
          (depth === best.depth && s.running.size < best.search.running.size)
        ) {
          best = { search: s, replicas, depth };
        }
      }
    }
    if (best !== null && best.depth === 0) return best;
    if (this.#nextRun < this.#spec.runs.length) return { run: this.#nextRun++ };
    return best;
  }

  #start(next: { search: SearchState; replicas: number } | { run: number }): void {
    this.#running++;
    this.#started++;
    const label =
      'run' in next
        ? (this.#spec.runLabels?.[next.run] ?? this.#spec.runs[next.run]!.router.policy)
        : `search ${next.search.spec.label} x ${next.replicas}`;
    const task = this.#spec.progress?.task(label);
    const onProgress = task && ((f: number) => task.update(f));
    const push = (c: Completion) => {
      task?.end();
      this.#running--;
      this.#completions.push(c);
      this.#wake?.();
    };
    const fail = (error: unknown) => push({ kind: 'error', error });
    if ('run' in next) {
      const index = next.run;
      const { outcome } = this.#pool.run(this.#spec.runs[index]!, onProgress);
      outcome.then((o) => push({ kind: 'run', index, outcome: o }), fail);
      return;
    }
    const { search, replicas } = next;
    const { id, outcome } = this.#pool.run(probeConfig(search.spec.config, replicas), onProgress);
    search.running.set(replicas, id);
    outcome.then((o) => push({ kind: 'probe', search, replicas, outcome: o }), fail);
  }

  /**
   * The progress line's count: simulations ended (cancelled ones too) and running, plus those
   * still to start: the fixed runs not started and each undecided search's expected probes
   * (`probesLeft`) less its running ones; and how many runs and searches are done.
   */
  #estimate(): BatchPhase {
    let future = this.#spec.runs.length - this.#nextRun;
    let decided = 0;
    for (const s of this.#searches) {
      if (s.result !== null) {
        decided++;
        continue;
      }
      const left = probesLeft(
        searchBounds(this.#spec.bounds, s.spec),
        (n) => s.runs.get(n)?.sloMet,
      );
      future += Math.max(0, Math.round(left.expected) - s.running.size);
    }
    const runsDone = this.#results.reduce((n, r) => n + (r === undefined ? 0 : 1), 0);
    const parts = [`runs ${runsDone}/${this.#spec.runs.length}`];
    if (this.#searches.length > 0)
      parts.push(`policies ${decided}/${this.#searches.length} searched`);
    return { total: this.#started + future, detail: parts.join(', ') };
  }

  #complete(c: Completion): void {
    if (c.kind === 'error') throw c.error;
    if (c.kind === 'run') {
      this.#results[c.index] = c.outcome!;
      return;
    }
    const s = c.search;
    s.running.delete(c.replicas);
    if (c.outcome !== null) s.runs.set(c.replicas, c.outcome);
    else this.#cancelled++;
    if (s.result !== null) return;
    const step = planSearch(searchBounds(this.#spec.bounds, s.spec), (n) => s.runs.get(n)?.sloMet);
    if ('answer' in step) {
      const unmet = step.answer.minReplicas === null ? this.#diagnose(s.spec.config) : null;
      s.result = searchResult(s.spec.label, step.answer, s.runs, unmet);
      for (const id of s.running.values()) this.#pool.cancel(id);
      return;
    }
    // Probes no outcome of the running ones leads to are of no use any more.
    const { useful } = this.#explore(s);
    for (const [n, id] of s.running) if (!useful.has(n)) this.#pool.cancel(id);
  }

  /**
   * The counts the search may ask for next: its replay under every outcome of the probes still
   * running, up to SPECULATE_DEPTH of them. `candidates`: counts neither known nor running, with
   * how many undecided probes precede them (0: needed now); `useful`: every count on the way.
   */
  #explore(s: SearchState): { candidates: [number, number][]; useful: Set<number> } {
    const candidates: [number, number][] = [];
    const useful = new Set<number>();
    const walk = (assumed: Map<number, boolean>, depth: number): void => {
      const step = planSearch(
        searchBounds(this.#spec.bounds, s.spec),
        (n) => s.runs.get(n)?.sloMet ?? assumed.get(n),
      );
      if ('answer' in step) return;
      const n = step.probe;
      useful.add(n);
      if (!s.running.has(n)) {
        candidates.push([n, depth]);
        return;
      }
      if (depth >= SPECULATE_DEPTH) return;
      walk(new Map(assumed).set(n, true), depth + 1);
      walk(new Map(assumed).set(n, false), depth + 1);
    };
    walk(new Map(), 0);
    return { candidates, useful };
  }
}
