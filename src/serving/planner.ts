/**
 * `kvroute serve --planner`: the online planner's shell. Every finished request is observed into
 * its model pool's window (src/planner/online/window.ts); every `intervalS` the window of each
 * pool with traffic is replayed on the simulator with `kvroute sim --search`'s own search on
 * worker threads (searchWindow.ts), the answer goes through the hysteresis (hysteresis.ts), and
 * the count is exported three ways: the gauge `kvroute_planner_desired_replicas{pool}`,
 * `GET /planner/desired` for KEDA's metrics-api scaler, and one log line when it changes.
 * One search runs at a time; a tick that finds one running is skipped.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Gauge, type Registry } from 'prom-client';
import type { BlockKey } from '../kv/blockKey.ts';
import { sendJson } from '../openai/http.ts';
import { Hysteresis, type PlannerMove } from '../planner/online/hysteresis.ts';
import { searchWindow, type WindowSearchAnswer, type WindowSearchOptions } from './searchWindow.ts';
import {
  type Observation,
  RequestWindow,
  recentOf,
  type WindowFit,
} from '../planner/online/window.ts';
import { chunkKeysOf } from '../planner/online/windowTrace.ts';
import type { Logger } from './log.ts';

/** The planner's settings (`--planner` and its companions). */
export interface PlannerConfig {
  /** The sliding window the traffic is fitted over, s (default 300). */
  windowS: number;
  /** How often the search runs, s (default 30). */
  intervalS: number;
  /** How long a lower answer must hold before the count goes down, s (default 300). */
  scaleDownS: number;
  /** The calibrated profile of the engines (`kvroute calibrate`); null: the catalog's model. */
  profile: string | null;
  /** The SLO: TTFT p99 and TPOT p99, ms (null: `kvroute sim`'s defaults). */
  sloTtftP99Ms: number | null;
  sloTpotP99Ms: number | null;
  /** Instead of sloTtftP99Ms: TTFT p99 at most this many times each request's own cold TTFT. */
  sloTtftSlowdown: number | null;
  /** Most replicas the search tries (the answer when none meets the SLO). */
  maxReplicas: number;
  /**
   * Also search the last this-many seconds alone and take the larger answer, so a rise in the
   * rate is acted on before it fills the window, s (0: off).
   */
  fastWindowS: number;
}

export const DEFAULT_PLANNER_WINDOW_S = 300;
export const DEFAULT_PLANNER_INTERVAL_S = 30;
export const DEFAULT_PLANNER_SCALE_DOWN_S = 300;
export const DEFAULT_PLANNER_MAX_REPLICAS = 64;
export const DEFAULT_PLANNER_FAST_WINDOW_S = 0;
/** Worker threads per search: two keep every probe off the gateway's event loop. */
const SEARCH_THREADS = 2;
/** A window needs this many requests before it is searched (a rate needs two arrivals). */
const MIN_REQUESTS = 2;
/** Output tokens of a request whose response reported no usage and that asked for no maximum. */
export const DEFAULT_OUTPUT_TOKENS = 256;

export function defaultPlannerConfig(): PlannerConfig {
  return {
    windowS: DEFAULT_PLANNER_WINDOW_S,
    intervalS: DEFAULT_PLANNER_INTERVAL_S,
    scaleDownS: DEFAULT_PLANNER_SCALE_DOWN_S,
    profile: null,
    sloTtftP99Ms: null,
    sloTpotP99Ms: null,
    sloTtftSlowdown: null,
    maxReplicas: DEFAULT_PLANNER_MAX_REPLICAS,
    fastWindowS: DEFAULT_PLANNER_FAST_WINDOW_S,
  };
}

/** `kvroute sim` flags for the planner's settings. */
export function plannerSimArgs(c: PlannerConfig): string[] {
  return [
    ...(c.profile !== null ? ['--profile', c.profile] : []),
    ...(c.sloTtftP99Ms !== null ? ['--slo-ttft-p99-ms', String(c.sloTtftP99Ms)] : []),
    ...(c.sloTpotP99Ms !== null ? ['--slo-tpot-p99-ms', String(c.sloTpotP99Ms)] : []),
    ...(c.sloTtftSlowdown !== null ? ['--slo-ttft-slowdown', String(c.sloTtftSlowdown)] : []),
  ];
}

/** What `/planner/desired` says of one pool. */
export interface PoolAnswer {
  pool: string;
  /** The count to run; null before the first search. */
  desiredReplicas: number | null;
  /** The last search's own answer, before hysteresis (maxReplicas when none met the SLO). */
  answerReplicas: number | null;
  /** The last search met the SLO at some count up to maxReplicas. */
  sloMet: boolean | null;
  answeredAtMs: number | null;
  fit: WindowFit | null;
}

interface PoolState {
  window: RequestWindow;
  hysteresis: Hysteresis;
  answer: PoolAnswer;
}

export type WindowSearch = (
  obs: readonly Observation[],
  options: WindowSearchOptions,
) => Promise<WindowSearchAnswer>;

export class GatewayPlanner {
  readonly config: PlannerConfig;
  readonly #pools = new Map<string, PoolState>();
  readonly #gauge: Gauge;
  readonly #logger: Logger;
  readonly #policy: string;
  readonly #blockSize: number;
  readonly #search: WindowSearch;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;

  constructor(
    config: PlannerConfig,
    deps: {
      registry: Registry;
      logger: Logger;
      policy: string;
      blockSize: number;
      search?: WindowSearch;
    },
  ) {
    this.config = config;
    this.#logger = deps.logger;
    this.#policy = deps.policy;
    this.#blockSize = deps.blockSize;
    this.#search = deps.search ?? searchWindow;
    this.#gauge = new Gauge({
      name: 'kvroute_planner_desired_replicas',
      help: 'Replicas the online planner asks for (the simulator on the live window, after hysteresis)',
      labelNames: ['pool'],
      registers: [deps.registry],
    });
  }

  /** A request ended: what the window keeps of it. `atMs` is its arrival (wall clock). */
  observe(
    pool: string | null,
    request: {
      atMs: number;
      promptTokens: number;
      outputTokens: number;
      blockKeys: readonly BlockKey[];
    },
  ): void {
    this.#pool(pool ?? 'default').window.add({
      atMs: request.atMs,
      promptTokens: request.promptTokens,
      outputTokens: Math.max(1, request.outputTokens),
      chunkKeys: chunkKeysOf(request.blockKeys, this.#blockSize),
    });
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(Date.now()), this.config.intervalS * 1000);
    this.#timer.unref();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  /** One round: each pool with traffic searched in turn. Skipped while one is still running. */
  tick(nowMs: number): Promise<void> {
    if (this.#running) return this.#running;
    this.#running = this.#round(nowMs).finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  answers(): PoolAnswer[] {
    return [...this.#pools.values()].map((p) => p.answer);
  }

  /** `GET /planner/desired[?pool=NAME]`: one pool's answer (default: the first with traffic). */
  handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const name = url.searchParams.get('pool');
    const answers = this.answers();
    const one = name === null ? answers[0] : answers.find((a) => a.pool === name);
    if (name !== null && one === undefined) {
      sendJson(res, 404, { error: `no pool '${name}'`, pools: answers.map((a) => a.pool) });
      return;
    }
    // KEDA's metrics-api scaler reads `desiredReplicas` (valueLocation); 0 before any traffic.
    sendJson(res, 200, {
      ...(one ?? emptyAnswer('default')),
      desiredReplicas: one?.desiredReplicas ?? 0,
      pools: answers.map((a) => ({ pool: a.pool, desiredReplicas: a.desiredReplicas })),
    });
  }

  async #round(nowMs: number): Promise<void> {
    for (const [name, p] of this.#pools) {
      const obs = p.window.observations(nowMs).sort((a, b) => a.atMs - b.atMs);
      if (obs.length < MIN_REQUESTS) continue;
      let answer: number;
      let result: WindowSearchAnswer;
      try {
        result = await this.#searchPool(obs, p.hysteresis.desired ?? 1);
        answer = result.minReplicas ?? this.config.maxReplicas;
        const recent = recentOf(obs, nowMs, this.config.fastWindowS * 1000, MIN_REQUESTS);
        if (recent !== null) {
          const fast = await this.#searchPool(recent, answer);
          answer = Math.max(answer, fast.minReplicas ?? this.config.maxReplicas);
        }
      } catch (err) {
        this.#logger.error({ pool: name, err }, 'planner: the search failed; the count stays');
        continue;
      }
      const before = p.hysteresis.desired;
      const step = p.hysteresis.step(answer, nowMs);
      const fit = p.window.fit(nowMs);
      p.answer = {
        pool: name,
        desiredReplicas: step.desired,
        answerReplicas: answer,
        sloMet: result.minReplicas !== null,
        answeredAtMs: nowMs,
        fit,
      };
      this.#gauge.set({ pool: name }, step.desired);
      if (step.move !== 'hold') this.#logChange(name, step.move, before, p.answer, result.probes);
    }
  }

  #searchPool(obs: readonly Observation[], startReplicas: number): Promise<WindowSearchAnswer> {
    return this.#search(obs, {
      simArgs: plannerSimArgs(this.config),
      policy: this.#policy,
      maxReplicas: this.config.maxReplicas,
      threads: SEARCH_THREADS,
      startReplicas,
    });
  }

  #logChange(
    pool: string,
    move: PlannerMove,
    before: number | null,
    a: PoolAnswer,
    probes: number,
  ): void {
    const fit = a.fit!;
    this.#logger.info(
      {
        pool,
        move,
        from: before,
        desiredReplicas: a.desiredReplicas,
        answerReplicas: a.answerReplicas,
        sloMet: a.sloMet,
        ratePerS: Number(fit.ratePerS.toFixed(3)),
        promptTokensP50: fit.promptTokens.p50,
        outputTokensP50: fit.outputTokens.p50,
        sharedChunkFraction: Number(fit.sharedChunkFraction.toFixed(3)),
        requests: fit.requests,
        probes,
      },
      'planner: desired replicas changed',
    );
  }

  #pool(name: string): PoolState {
    let p = this.#pools.get(name);
    if (p === undefined) {
      p = {
        window: new RequestWindow(this.config.windowS * 1000),
        hysteresis: new Hysteresis({ scaleDownMs: this.config.scaleDownS * 1000 }),
        answer: emptyAnswer(name),
      };
      this.#pools.set(name, p);
    }
    return p;
  }
}

function emptyAnswer(pool: string): PoolAnswer {
  return {
    pool,
    desiredReplicas: null,
    answerReplicas: null,
    sloMet: null,
    answeredAtMs: null,
    fit: null,
  };
}

/** The output tokens a finished request is counted with: usage, else its maximum, else a default. */
export function outputTokensOf(reported: number | null, json: unknown): number {
  if (reported !== null) return reported;
  if (typeof json === 'object' && json !== null) {
    const body = json as { max_tokens?: unknown; max_completion_tokens?: unknown };
    for (const v of [body.max_completion_tokens, body.max_tokens]) {
      if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
    }
  }
  return DEFAULT_OUTPUT_TOKENS;
}
