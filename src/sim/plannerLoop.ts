/**
 * `kvroute sim --planner`: a trace replayed with the online planner in the loop. The planner is
 * the one `serve --planner` runs (`src/planner/online/`): every request the fleet lets in goes
 * into its window (`RequestWindow`) at its arrival; every `intervalMs` of simulated time the
 * window is replayed with sim's replica search (`plannerLoopSearch.ts`) and the answer goes
 * through the hysteresis (`Hysteresis`); the fleet (`fleet.ts`, `FleetScaling`) then starts
 * replicas, routable `startupMs` later, or drains the newest ones. No clock: the planner sees
 * simulated time only, so a seed gives the same run.
 *
 * What it reports: the fleet's size over time, its replica-hours (a replica counts from the
 * moment it is asked for, start-up included, until it has drained), the time of the first answer
 * and the run's own SLO figures.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { SimulatedRun } from '../results/result.ts';
import { Hysteresis, type PlannerMove } from '../planner/online/hysteresis.ts';
import { RequestWindow, recentOf } from '../planner/online/window.ts';
import { chunkKeysOf } from '../planner/online/windowTrace.ts';
import type { Observation } from '../planner/online/window.ts';
import type { Arrival } from '../workload/workloads.ts';
import type { FleetScaling, ScalingPoint } from './fleet.ts';
import { type LoopSearchAnswer, searchWindowInLoop } from './plannerLoopSearch.ts';
import { makeSimRouter } from './routerAdapter.ts';
import { type SimConfig, simulate } from './run.ts';

export interface PlannerLoopOptions {
  /** The window of arrivals the planner fits, ms. */
  windowMs: number;
  /** How often it answers, ms of simulated time. */
  intervalMs: number;
  /** How long a lower answer must hold before the count goes down, ms. */
  scaleDownMs: number;
  /** A replica asked for takes requests this long later, ms. */
  startupMs: number;
  /** Most replicas the search tries (the answer when none meets the SLO). */
  maxReplicas: number;
  /**
   * Also search the arrivals of this last stretch alone and answer the larger count (0: off,
   * the gateway's planner): a rise in the rate shows in a short window long before it
   * dominates the long one, while the long one keeps a quiet stretch from lowering the count.
   */
  fastWindowMs?: number;
}

/** One planner round: what the search answered and the count asked of the fleet. */
export interface PlannerRound {
  atMs: number;
  /** Requests in the window. */
  requests: number;
  /** The search's answer; null when no count up to maxReplicas met the SLO. */
  answer: number | null;
  /** With a fast window: its own answer (null: none met the SLO, or too few requests). */
  fastAnswer?: number | null;
  /** The count after hysteresis. */
  desired: number;
  move: PlannerMove;
  probes: number;
}

/** A window needs this many requests before it is searched (as the gateway's planner). */
const MIN_REQUESTS = 2;

export type LoopSearch = (obs: readonly Observation[], startReplicas: number) => LoopSearchAnswer;

/** The planner as the fleet asks it (`FleetScaling`), its rounds kept for the report. */
export class SimPlanner implements FleetScaling {
  readonly intervalMs: number;
  readonly startupMs: number;
  readonly rounds: PlannerRound[] = [];
  readonly #window: RequestWindow;
  readonly #hysteresis: Hysteresis;
  readonly #search: LoopSearch;
  readonly #blockSize: number;
  readonly #maxReplicas: number;
  readonly #initialReplicas: number;
  readonly #fastWindowMs: number;

  constructor(
    options: PlannerLoopOptions,
    deps: { search: LoopSearch; blockSize: number; initialReplicas: number },
  ) {
    this.intervalMs = options.intervalMs;
    this.startupMs = options.startupMs;
    this.#window = new RequestWindow(options.windowMs);
    this.#hysteresis = new Hysteresis({ scaleDownMs: options.scaleDownMs });
    // The count running when the planner starts holds as an answer at time 0: a first window,
    // short and cold, may lower it only once scale-down has passed, as any answer would.
    this.#hysteresis.step(deps.initialReplicas, 0);
    this.#search = deps.search;
    this.#blockSize = deps.blockSize;
    this.#maxReplicas = options.maxReplicas;
    this.#initialReplicas = deps.initialReplicas;
    this.#fastWindowMs = options.fastWindowMs ?? 0;
  }

  observe(arrival: Arrival, blockKeys: readonly BlockKey[]): void {
    this.#window.add({
      atMs: arrival.atMs,
      promptTokens: arrival.promptLength,
      outputTokens: Math.max(1, arrival.outputTokens),
      chunkKeys: chunkKeysOf(blockKeys, this.#blockSize),
    });
  }

  desired(nowMs: number): number | null {
    const obs = this.#window.observations(nowMs).sort((a, b) => a.atMs - b.atMs);
    if (obs.length < MIN_REQUESTS) return null;
    const start = this.#hysteresis.desired ?? this.#initialReplicas;
    const result = this.#search(obs, start);
    let answer = result.minReplicas ?? this.#maxReplicas;
    let probes = result.probes;
    let fastAnswer: number | null | undefined;
    if (this.#fastWindowMs > 0) {
      const recent = recentOf(obs, nowMs, this.#fastWindowMs, MIN_REQUESTS);
      fastAnswer = null;
      if (recent !== null) {
        const fast = this.#search(recent, answer);
        fastAnswer = fast.minReplicas;
        probes += fast.probes;
        answer = Math.max(answer, fast.minReplicas ?? this.#maxReplicas);
      }
    }
    const step = this.#hysteresis.step(answer, nowMs);
    this.rounds.push({
      atMs: nowMs,
      requests: obs.length,
      answer: result.minReplicas,
      ...(fastAnswer !== undefined && { fastAnswer }),
      desired: step.desired,
      move: step.move,
      probes,
    });
    return step.desired;
  }
}

export interface PlannerLoopResult {
  options: PlannerLoopOptions;
  /** The fleet's count before the first answer. */
  initialReplicas: number;
  rounds: PlannerRound[];
  /** The fleet's size at 0 and after each change. */
  sizes: ScalingPoint[];
  /** When the first answer came, s of simulated time; null: never. */
  firstAnswerS: number | null;
  /** Replica-hours over the arrivals' span [0, spanS): starting, serving and draining replicas. */
  replicaHours: number;
  /** The same to the run's end (the last request's end). */
  replicaHoursToEnd: number;
  spanS: number;
  endS: number;
}

export interface PlannerLoopRun {
  run: SimulatedRun;
  planner: PlannerLoopResult;
}

/** `config` run with the planner in the loop, from `config.replicas` replicas. */
export function simulatePlannerLoop(
  config: SimConfig,
  options: PlannerLoopOptions,
  search: LoopSearch = (obs, start) =>
    searchWindowInLoop(obs, config, { start, max: options.maxReplicas }),
): PlannerLoopRun {
  const planner = new SimPlanner(options, {
    search,
    blockSize: config.engine.blockSize,
    initialReplicas: config.replicas,
  });
  let sizes: ScalingPoint[] = [];
  let endMs = 0;
  const run = simulate(config, makeSimRouter, {
    scaling: planner,
    onOutcome: (o) => {
      sizes = o.scaling ?? [];
      // The last request's end (a replica still starting then would only stretch the clock).
      endMs = Number.isNaN(o.lastMeasuredEndMs) ? o.endMs : o.lastMeasuredEndMs;
    },
  });
  const spanMs = (run.durationS ?? 0) * 1000;
  return {
    run,
    planner: {
      options,
      initialReplicas: config.replicas,
      rounds: planner.rounds,
      sizes,
      firstAnswerS: planner.rounds.length > 0 ? planner.rounds[0]!.atMs / 1000 : null,
      replicaHours: replicaMsOf(sizes, spanMs) / 3.6e6,
      replicaHoursToEnd: replicaMsOf(sizes, endMs) / 3.6e6,
      spanS: spanMs / 1000,
      endS: endMs / 1000,
    },
  };
}

/** Replica-ms over [0, untilMs) of a size log (each point holds until the next). */
export function replicaMsOf(sizes: readonly ScalingPoint[], untilMs: number): number {
  let total = 0;
  for (let i = 0; i < sizes.length; i++) {
    const p = sizes[i]!;
    if (p.atMs >= untilMs) break;
    const toMs = Math.min(untilMs, sizes[i + 1]?.atMs ?? untilMs);
    total += (p.serving + p.starting + p.draining) * (toMs - p.atMs);
  }
  return total;
}

/** The replicas counted (starting, serving, draining) at `atMs` of a size log. */
export function replicasAt(sizes: readonly ScalingPoint[], atMs: number): number {
  let n = 0;
  for (const p of sizes) {
    if (p.atMs > atMs) break;
    n = p.serving + p.starting + p.draining;
  }
  return n;
}
