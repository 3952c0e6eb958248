/**
 * `kvroute serve --planner`: the online planner's shell. Every finished request is observed into
 * its model pool's window (src/planner/online/window.ts); every `intervalS` the window of each
 * pool with traffic is replayed on the simulator with `kvroute sim --search`'s own search on
 * worker threads (searchWindow.ts), the answer goes through the hysteresis (hysteresis.ts), and
 * the count is exported three ways: the gauge `kvroute_planner_desired_replicas{pool}`,
 * `GET /planner/desired` for KEDA's metrics-api scaler, and one log line when it changes.
 * One search runs at a time; a tick that finds one running is skipped.
 *
 * With several gateways or pickers (`--nats`), each sees only its share of the traffic. As
 * Dynamo's planner plans on the sum of every frontend's requests
 * (`components/src/dynamo/planner/utils/prometheus.py`, `get_avg_request_count` adds up each
 * frontend's count), each instance shares what it observes over the sync channel
 * (`shareWith`, src/sync/plannerRecords.ts) and adds its peers' requests to its own window, so
 * every instance searches the cluster's traffic; each also shares its count, and exports the
 * highest of its own and its live peers' (peerCounts.ts): the autoscaler may ask any instance.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Gauge, type Registry } from 'prom-client';
import type { BlockKey } from '../kv/blockKey.ts';
import { sendJson } from '../openai/http.ts';
import {
  DEFAULT_PLANNER_INTERVAL_S,
  DEFAULT_PLANNER_MAX_REPLICAS,
  DEFAULT_PLANNER_SCALE_DOWN_S,
  DEFAULT_PLANNER_WINDOW_S,
} from '../planner/online/defaults.ts';
import { Hysteresis, type PlannerMove } from '../planner/online/hysteresis.ts';
import { type PeerCount, PeerCounts } from '../planner/online/peerCounts.ts';
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

// The defaults `kvroute sim --planner` shares, from their one home.
export {
  DEFAULT_PLANNER_INTERVAL_S,
  DEFAULT_PLANNER_MAX_REPLICAS,
  DEFAULT_PLANNER_SCALE_DOWN_S,
  DEFAULT_PLANNER_WINDOW_S,
};
export const DEFAULT_PLANNER_FAST_WINDOW_S = 0;
/** Worker threads per search: two keep every probe off the gateway's event loop. */
const SEARCH_THREADS = 2;
/** A window needs this many requests before it is searched (a rate needs two arrivals). */
const MIN_REQUESTS = 2;
/** Shared requests wait at most this long to be sent to the peers together, ms. */
export const SHARE_FLUSH_MS = 1_000;
/** A peer's count is forgotten this many search intervals after it came. */
const PEER_STALE_INTERVALS = 3;
/** Output tokens of a request whose response reported no usage and that asked for no maximum. */
export const DEFAULT_OUTPUT_TOKENS = 256;

/** The planner's settings where neither a flag nor the config gives one. */
const PLANNER_DEFAULTS: Readonly<PlannerConfig> = {
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

export function defaultPlannerConfig(): PlannerConfig {
  return { ...PLANNER_DEFAULTS };
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
  /**
   * The count to run; null before the first search. With peers (`--nats`): the highest of this
   * instance's count and its live peers' (`ownReplicas`, `peers`).
   */
  desiredReplicas: number | null;
  /** This instance's own count (after its hysteresis); null before its first search. */
  ownReplicas: number | null;
  /** The live peers' counts (empty without peers). */
  peers: { peer: string; desiredReplicas: number }[];
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
  peers: PeerCounts;
  /** Observed here since the last share (only while shared). */
  outbox: Observation[];
}

/** Sends this instance's new observations and count of a pool to its peers. */
export type PlannerShare = (
  pool: string,
  observations: readonly Observation[],
  desired: number | null,
) => void;

/** A peer's message, as the sync decoded it (its arrivals on this instance's clock). */
export interface PeerPlannerMessage {
  pool: string;
  observations: readonly Observation[];
  desired: number | null;
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
  #shareTimer: NodeJS.Timeout | null = null;
  #share: PlannerShare | null = null;
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
    const p = this.#pool(pool ?? 'default');
    const o: Observation = {
      atMs: request.atMs,
      promptTokens: request.promptTokens,
      outputTokens: Math.max(1, request.outputTokens),
      chunkKeys: chunkKeysOf(request.blockKeys, this.#blockSize),
    };
    p.window.add(o);
    if (this.#share) p.outbox.push(o);
  }

  /**
   * Shares with the cluster's other planners (`--nats`): what this instance observes goes to
   * `share` every SHARE_FLUSH_MS, its count after every round; theirs come to `peerMessage`.
   */
  shareWith(share: PlannerShare): void {
    this.#share = share;
  }

  /** A peer's requests join this instance's window; its count is kept while it is live. */
  peerMessage(peer: string, m: PeerPlannerMessage, nowMs: number): void {
    const p = this.#pool(m.pool);
    for (const o of m.observations) p.window.add(o);
    if (m.desired !== null) {
      p.peers.set(peer, m.desired, nowMs);
      this.#export(p, nowMs);
    }
  }

  /** A peer left: its count no longer counts. */
  peerGone(peer: string, nowMs: number): void {
    for (const p of this.#pools.values()) {
      p.peers.drop(peer);
      this.#export(p, nowMs);
    }
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(Date.now()), this.config.intervalS * 1000);
    this.#timer.unref();
    if (this.#share) {
      this.#shareTimer = setInterval(() => this.#flushShare(false), SHARE_FLUSH_MS);
      this.#shareTimer.unref();
    }
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    if (this.#shareTimer) clearInterval(this.#shareTimer);
    this.#timer = null;
    this.#shareTimer = null;
    await this.#running;
    this.#flushShare(false);
  }

  /** One round: each pool with traffic searched in turn. Skipped while one is still running. */
  tick(nowMs: number): Promise<void> {
    if (this.#running) return this.#running;
    this.#running = this.#round(nowMs).finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  /** The fit of a pool's window now (with peers: the cluster's requests); null: no such pool. */
  fitOf(pool: string, nowMs = Date.now()): WindowFit | null {
    return this.#pools.get(pool)?.window.fit(nowMs) ?? null;
  }

  /** Each pool's answer now (with peers: the cluster's count as `desiredReplicas`). */
  answers(nowMs = Date.now()): PoolAnswer[] {
    return [...this.#pools.values()].map((p) => this.#answerOf(p, nowMs));
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
        ...p.answer,
        desiredReplicas: step.desired,
        ownReplicas: step.desired,
        answerReplicas: answer,
        sloMet: result.minReplicas !== null,
        answeredAtMs: nowMs,
        fit,
      };
      this.#export(p, nowMs);
      if (step.move !== 'hold') this.#logChange(name, step.move, before, p.answer, result.probes);
    }
    // Every count, searched this round or held, goes to the peers: a live peer's count is fresh.
    this.#flushShare(true);
  }

  /** The pool's answer with the cluster's count. */
  #answerOf(p: PoolState, nowMs: number): PoolAnswer {
    const own = p.hysteresis.desired;
    const peers = p.peers.live(nowMs);
    return {
      ...p.answer,
      desiredReplicas: p.peers.fleet(own, nowMs),
      ownReplicas: own,
      peers: peers.map((c: PeerCount) => ({ peer: c.peer, desiredReplicas: c.desiredReplicas })),
    };
  }

  /** The gauge follows the cluster's count. */
  #export(p: PoolState, nowMs: number): void {
    const desired = p.peers.fleet(p.hysteresis.desired, nowMs);
    if (desired !== null) this.#gauge.set({ pool: p.answer.pool }, desired);
  }

  /** Each pool's new observations to the peers; `counts`: every pool with a count, even without. */
  #flushShare(counts: boolean): void {
    const share = this.#share;
    if (!share) return;
    for (const [name, p] of this.#pools) {
      const desired = p.hysteresis.desired;
      if (p.outbox.length === 0 && !(counts && desired !== null)) continue;
      const batch = p.outbox;
      p.outbox = [];
      share(name, batch, desired);
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
        peers: new PeerCounts(PEER_STALE_INTERVALS * this.config.intervalS * 1000),
        outbox: [],
      };
      this.#pools.set(name, p);
    }
    return p;
  }
}

/** The sync channel as the planner shares over it (`StateSync`). */
export interface PlannerChannel {
  sharePlanner: PlannerShare;
  attachPlanner(sink: Pick<GatewayPlanner, 'peerMessage' | 'peerGone'>): void;
}

/** `--planner` with `--nats`: the planner shares with its peers over the sync (before start). */
export function sharePlannerOver(planner: GatewayPlanner, channel: PlannerChannel): void {
  planner.shareWith((pool, observations, desired) =>
    channel.sharePlanner(pool, observations, desired),
  );
  channel.attachPlanner(planner);
}

function emptyAnswer(pool: string): PoolAnswer {
  return {
    pool,
    desiredReplicas: null,
    ownReplicas: null,
    peers: [],
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
