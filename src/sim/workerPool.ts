/**
 * Simulations on worker threads: each worker runs one `simulate` at a time from a plain config
 * (callbacks are dropped; the pool reports completions instead) and sends back the plain result.
 * A simulation is deterministic, so a result from a worker is the one `simulate` gives in-process.
 *
 * Workers run the TypeScript sources through tsx, registered in the worker itself before the
 * entry is imported: the same loader `bin/kvroute.js` and the tests use.
 */
import { Worker } from 'node:worker_threads';
import type { SimulatedRun } from '../results/result.ts';
import type { SloTargets } from '../results/slo.ts';
import type { PdRunResult } from './pd/runPd.ts';
import type { SimConfig } from './run.ts';

export interface TaskMessage {
  id: number;
  config: SimConfig;
  /** A P/D split search on `config` (`pd/runPd.ts`) instead of one simulation. */
  pdSearch?: PdSearchTask;
}

/** A split search's options as they cross to a worker (no callbacks). */
export interface PdSearchTask {
  slo: SloTargets;
  transferGbps: number;
  transferLatencyMs: number;
  maxReplicas: number;
  spare?: number;
}

/** A split search's answer, from `PdSearcher.searchDisaggregated`, with its runs made. */
export interface PdSearchOutcome {
  split: { prefill: number; decode: number } | null;
  run: PdRunResult | null;
  spare: number;
  probes: number;
}

export type WorkerReply =
  | { id: number; kind: 'done'; result: SimulatedRun }
  | { id: number; kind: 'pd-done'; pd: PdSearchOutcome }
  /** On the way: the fraction done (of simulated time, or a search's probes; the task goes on). */
  | { id: number; kind: 'progress'; fraction: number; detail?: string }
  | { id: number; kind: 'cancelled' }
  | { id: number; kind: 'error'; message: string; code: unknown };

/** A task's end: its result, or null when it was cancelled. */
export type TaskOutcome = SimulatedRun | null;

interface Slot {
  worker: Worker;
  /** The task it runs, if any. */
  task: {
    id: number;
    resolve: (o: TaskOutcome | PdSearchOutcome) => void;
    reject: (e: Error) => void;
    onProgress: ((fraction: number, detail?: string) => void) | undefined;
  } | null;
  /** Crashed or exited: takes no more tasks. */
  dead: boolean;
}

/** A worker's failure with the simulation's own message and code (e.g. ERR_TRACE). */
export class SimWorkerError extends Error {
  readonly code: unknown;
  constructor(message: string, code: unknown) {
    super(message);
    this.code = code;
  }
}

export class SimPool {
  readonly #slots: Slot[];
  readonly #cancel: Int32Array;
  #nextId = 1;
  #closed = false;

  constructor(threads: number) {
    this.#cancel = new Int32Array(new SharedArrayBuffer(4 * threads));
    const entry = new URL('./simWorker.ts', import.meta.url).href;
    const tsx = import.meta.resolve('tsx/esm/api');
    // A CommonJS bootstrap: register tsx's loader in this thread, then import the entry.
    const bootstrap = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`;
    this.#slots = Array.from({ length: threads }, (_, slot) => {
      const worker = new Worker(bootstrap, {
        eval: true,
        workerData: { cancel: this.#cancel, slot },
      });
      const s: Slot = { worker, task: null, dead: false };
      worker.on('message', (reply: WorkerReply) => this.#onReply(s, reply));
      worker.on('error', (err) => this.#onCrash(s, err));
      worker.on('exit', (code) => {
        if (!this.#closed) this.#onCrash(s, new Error(`simulation worker exited (${code})`));
      });
      return s;
    });
  }

  get threads(): number {
    return this.#slots.length;
  }

  /** Workers without a task. */
  get idle(): number {
    return this.#slots.reduce((n, s) => n + (s.task === null && !s.dead ? 1 : 0), 0);
  }

  /**
   * Runs `config` on an idle worker (there must be one); resolves with the result, or null once
   * `cancel()` stopped it. Callbacks in `config` are not carried over; `onProgress` hears the
   * worker's fractions of simulated time instead.
   */
  run(
    config: SimConfig,
    onProgress?: (fraction: number) => void,
  ): { id: number; outcome: Promise<TaskOutcome> } {
    return this.#start<TaskOutcome>('run', config, undefined, onProgress);
  }

  /**
   * Runs a P/D split search on `config` on an idle worker (there must be one): its answer is the
   * one `PdSearcher.searchDisaggregated` gives in-process. `onProgress` hears the probes made, as
   * a fraction of `expectedProbes`, with the split probed.
   */
  runPdSearch(
    config: SimConfig,
    pd: PdSearchTask,
    onProgress?: (fraction: number, detail?: string) => void,
  ): Promise<PdSearchOutcome> {
    return this.#start<PdSearchOutcome>('runPdSearch', config, pd, onProgress).outcome;
  }

  /**
   * Hands `config` (less its callbacks, which cannot cross to a worker) and `pdSearch` to an idle
   * worker; `caller` names the method in the error when none is idle.
   */
  #start<O extends TaskOutcome | PdSearchOutcome>(
    caller: string,
    config: SimConfig,
    pdSearch: PdSearchTask | undefined,
    onProgress: ((fraction: number, detail?: string) => void) | undefined,
  ): { id: number; outcome: Promise<O> } {
    const slot = this.#slots.find((s) => s.task === null && !s.dead);
    if (slot === undefined) throw new Error(`SimPool.${caller}: no idle worker`);
    const id = this.#nextId++;
    const { onProgress: _p, instrument: _i, ...plain } = config;
    const outcome = new Promise<O>((resolve, reject) => {
      slot.task = {
        id,
        resolve: resolve as (o: TaskOutcome | PdSearchOutcome) => void,
        reject,
        onProgress,
      };
    });
    const message: TaskMessage =
      pdSearch === undefined ? { id, config: plain } : { id, config: plain, pdSearch };
    slot.worker.postMessage(message);
    return { id, outcome };
  }

  /** Stops task `id` at its next progress check, if it is still running. */
  cancel(id: number): void {
    const i = this.#slots.findIndex((s) => s.task?.id === id);
    if (i >= 0) Atomics.store(this.#cancel, i, id);
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#slots.map((s) => s.worker.terminate()));
  }

  #onReply(slot: Slot, reply: WorkerReply): void {
    const task = slot.task;
    if (task === null || task.id !== reply.id) return;
    if (reply.kind === 'progress') {
      task.onProgress?.(reply.fraction, reply.detail);
      return;
    }
    slot.task = null;
    if (reply.kind === 'done') task.resolve(reply.result);
    else if (reply.kind === 'pd-done') task.resolve(reply.pd);
    else if (reply.kind === 'cancelled') task.resolve(null);
    else task.reject(new SimWorkerError(reply.message, reply.code));
  }

  #onCrash(slot: Slot, err: Error): void {
    const task = slot.task;
    slot.task = null;
    slot.dead = true;
    task?.reject(err);
  }
}
