/**
 * The gateway's own Prometheus metrics, in a registry of its own (several gateways can live in
 * one process, as the tests do). Per-replica gauges are read from the router when scraped, so
 * the hot path only bumps counters.
 *
 * Latency histograms (`kvroute_gateway_*_seconds`) are labelled by `model` and `tenant` (TTFT
 * also by `replica`). Both come from clients, so their values are bounded: a tenant is named only
 * when the config names it (else `other`; no tenant at all is `none`), and a model only among the
 * first MAX_MODEL_LABELS seen (then `other`). prom-client's default process metrics (`process_*`,
 * `nodejs_*`, unprefixed, as every Node.js exporter names them) are in the same registry.
 */
import type { ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { RouteDecision } from '../router/index.ts';
import { AuditMetrics } from './audit/metrics.ts';
import { LatencyWindow } from './latency.ts';
import { LabelledCounter, LabelledHistogram } from './metricSeries.ts';
import type { RequestRecord } from './requestLog.ts';
import type { TokenizerAgreement } from './tokenizerCheck.ts';

/** Distinct `model` label values before the rest are folded into `other`. */
export const MAX_MODEL_LABELS = 32;
/** Status of a request whose client left before any response head (nginx's convention). */
export const CLIENT_CLOSED_STATUS = 499;

const TTFT_BUCKETS_S = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
const E2E_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640];
const PRE_UPSTREAM_BUCKETS_S = [
  1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1,
];
const DECISION_BUCKETS_S = [1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3];

export interface ReplicaLoad {
  name: string;
  /** Base model of the replica's pool ('' when not known). */
  model: string;
  /** Queued prompt tokens in the router's ledger. */
  queuedPromptTokens: number;
  inFlight: number;
  up: boolean;
  /** Whether the gateway's token ids match the replica's (the tokenizer agreement check). */
  tokenizer: TokenizerAgreement;
}

const AGREEMENT_VALUE: Record<TokenizerAgreement, number> = { agrees: 1, differs: 0, unknown: -1 };

export interface ReplicaGaugeSource {
  replicaLoads(): ReplicaLoad[];
  /** Tenants the config names: the only values of the `tenant` label besides other / none. */
  knownTenants?: readonly string[];
}

/** Decisions and prompt tokens routed to one replica, since start (the dashboard's rates). */
export interface ReplicaTally {
  decisions: number;
  cachedTokens: number;
  uncachedTokens: number;
  spills: number;
}

/** A counter: its name, its help and, when it has labels (a `LabelledCounter`), their names. */
type CounterSpec = readonly [name: string, help: string, labelNames?: readonly string[]];

/**
 * The gateway's counters, registered in this order. The request path bumps them, the labelled
 * ones with their label sets resolved once (metricSeries.ts).
 */
// biome-ignore format: one counter a line
const COUNTERS = {
  decisions: ['kvroute_gateway_decisions_total', 'Routing decisions, by policy, chosen replica and model', ['policy', 'replica', 'model']],
  promptTokens: ['kvroute_gateway_prompt_tokens_routed_total', 'Prompt tokens routed, by whether the chosen replica had them cached, and model', ['kind', 'model']],
  spills: ['kvroute_gateway_spills_total', 'Requests sent away from the replica holding their longest prefix', ['policy', 'model']],
  sessionAffinity: ['kvroute_gateway_session_affinity_total', 'Requests with a session key: kept on their session replica, left it, or new', ['outcome', 'model']],
  failOpen: ['kvroute_gateway_fail_open_total', 'Decisions made with every replica filtered out (the filters were relaxed)', ['policy', 'model']],
  retries: ['kvroute_gateway_retries_total', 'Attempts repeated on another replica after a refused or reset connection'],
  upstreamReconnects: ['kvroute_gateway_upstream_reconnects_total', 'Attempts repeated on a fresh connection to the same replica: it closed a kept-alive one under the request'],
  remoteTokenizeFallbacks: ['kvroute_gateway_remote_tokenize_fallbacks_total', 'Requests tokenized locally because no backend /tokenize answered (--tokenize remote)'],
  requests: ['kvroute_gateway_requests_total', 'Requests answered, by endpoint, status (499: the client left first), model and tenant', ['endpoint', 'status', 'model', 'tenant']],
  rejections: ['kvroute_gateway_rejected_total', 'Requests refused with 429 by admission control, by the limit that refused them', ['limit', 'tenant']],
  brokenStreams: ['kvroute_gateway_broken_streams_total', 'Responses cut by a backend failure after bytes reached the client'],
  clientAborts: ['kvroute_gateway_client_aborts_total', 'Requests whose client left before the response ended'],
} as const satisfies Record<string, CounterSpec>;

type GatewayCounters = {
  [K in keyof typeof COUNTERS]: (typeof COUNTERS)[K] extends readonly [string, string, unknown]
    ? LabelledCounter
    : Counter;
};

/** COUNTERS registered in `registry`, each under its key. */
function gatewayCounters(registry: Registry): GatewayCounters {
  const out: Record<string, Counter | LabelledCounter> = {};
  for (const [key, [name, help, labelNames]] of Object.entries<CounterSpec>(COUNTERS)) {
    out[key] =
      labelNames === undefined
        ? new Counter({ name, help, registers: [registry] })
        : new LabelledCounter(name, help, labelNames, registry);
  }
  return out as GatewayCounters;
}

/** The gateway's latency histograms, registered in this order. */
function gatewayHistograms(registry: Registry) {
  const histogram = (name: string, help: string, buckets: number[], labelNames: string[]) =>
    new LabelledHistogram(name, help, buckets, labelNames, registry);
  return {
    decisionSeconds: histogram(
      'kvroute_gateway_decision_seconds',
      'Time to choose a replica (tokenize excluded); also by model as route_decision_seconds',
      DECISION_BUCKETS_S,
      [],
    ),
    routeDecisionSeconds: histogram(
      'kvroute_gateway_route_decision_seconds',
      'Time the router took to choose a replica, per attempt (tokenize excluded)',
      DECISION_BUCKETS_S,
      ['model'],
    ),
    ttftSeconds: histogram(
      'kvroute_gateway_ttft_seconds',
      'From the request reaching the gateway to its first token leaving for the client',
      TTFT_BUCKETS_S,
      ['model', 'tenant', 'replica'],
    ),
    e2eSeconds: histogram(
      'kvroute_gateway_e2e_seconds',
      'From the request reaching the gateway to the end of its response, for proxied requests',
      E2E_BUCKETS_S,
      ['model', 'tenant'],
    ),
    preUpstreamSeconds: histogram(
      'kvroute_gateway_pre_upstream_seconds',
      'Time in the gateway before the first upstream call: read, tokenize, admit, route',
      PRE_UPSTREAM_BUCKETS_S,
      ['model', 'tenant'],
    ),
  };
}

/** Per-replica gauges read from the router at scrape time. */
function registerReplicaGauges(registers: Registry[], source: ReplicaGaugeSource): void {
  const replicaGauge = (name: string, help: string, value: (r: ReplicaLoad) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['replica', 'model'],
      registers,
      collect() {
        this.reset();
        for (const r of source.replicaLoads()) {
          this.set({ replica: r.name, model: r.model }, value(r));
        }
      },
    });

  replicaGauge(
    'kvroute_gateway_replica_queued_prompt_tokens',
    'Uncached prompt tokens assigned to the replica whose first token has not come back',
    (r) => r.queuedPromptTokens,
  );
  replicaGauge(
    'kvroute_gateway_replica_in_flight',
    'Requests in flight on the replica',
    (r) => r.inFlight,
  );
  replicaGauge(
    'kvroute_gateway_tokenizer_agrees',
    "1 when the gateway's token ids match the replica's /tokenize, 0 when they differ, -1 unknown",
    (r) => AGREEMENT_VALUE[r.tokenizer],
  );
  replicaGauge(
    'kvroute_gateway_replica_up',
    '1 when the replica is taking traffic, 0 while marked down',
    (r) => (r.up ? 1 : 0),
  );
}

export class GatewayMetrics {
  readonly registry = new Registry();
  /** The cache audit's counters and error histogram (`audit/`). */
  readonly audit = new AuditMetrics(this.registry);
  readonly #counters = gatewayCounters(this.registry);
  readonly decisions = this.#counters.decisions;
  readonly promptTokens = this.#counters.promptTokens;
  readonly spills = this.#counters.spills;
  readonly failOpen = this.#counters.failOpen;
  /** Session affinity's outcomes (router.ts AffinityOutcome): kept, left, new. */
  readonly sessionAffinity = this.#counters.sessionAffinity;
  readonly retries = this.#counters.retries;
  readonly upstreamReconnects = this.#counters.upstreamReconnects;
  readonly remoteTokenizeFallbacks = this.#counters.remoteTokenizeFallbacks;
  readonly requests = this.#counters.requests;
  readonly brokenStreams = this.#counters.brokenStreams;
  readonly clientAborts = this.#counters.clientAborts;
  readonly decisionSeconds: LabelledHistogram;
  readonly routeDecisionSeconds: LabelledHistogram;
  readonly ttftSeconds: LabelledHistogram;
  readonly e2eSeconds: LabelledHistogram;
  readonly preUpstreamSeconds: LabelledHistogram;
  readonly rejections = this.#counters.rejections;
  /** TTFTs of the last minutes, for the dashboard's percentiles. */
  readonly recentTtft = new LatencyWindow();
  /** Per replica and per policy, plain numbers the dashboard reads every second. */
  readonly replicaTally = new Map<string, ReplicaTally>();
  readonly policyDecisions = new Map<string, number>();
  readonly #knownTenants: ReadonlySet<string>;
  readonly #models = new Set<string>();

  constructor(source: ReplicaGaugeSource) {
    const histograms = gatewayHistograms(this.registry);
    this.decisionSeconds = histograms.decisionSeconds;
    this.routeDecisionSeconds = histograms.routeDecisionSeconds;
    this.ttftSeconds = histograms.ttftSeconds;
    this.e2eSeconds = histograms.e2eSeconds;
    this.preUpstreamSeconds = histograms.preUpstreamSeconds;
    this.#knownTenants = new Set(source.knownTenants ?? []);
    collectDefaultMetrics({ register: this.registry });
    registerReplicaGauges([this.registry], source);
  }

  /** One routing decision in the pool of `model`, and how long it took. */
  recordDecision(d: RouteDecision, seconds: number, model: string | null = null): void {
    const label = this.modelLabel(model);
    this.decisionSeconds.series().observe(seconds);
    this.routeDecisionSeconds.series(label).observe(seconds);
    this.decisions.series(d.policy, d.replica, label).inc();
    this.promptTokens.series('cached', label).inc(d.cachedTokens);
    this.promptTokens.series('uncached', label).inc(d.uncachedTokens);
    if (d.spilled) this.spills.series(d.policy, label).inc();
    if (d.failedOpen) this.failOpen.series(d.policy, label).inc();
    if (d.affinity !== undefined) this.sessionAffinity.series(d.affinity, label).inc();
    this.policyDecisions.set(d.policy, (this.policyDecisions.get(d.policy) ?? 0) + 1);
    let tally = this.replicaTally.get(d.replica);
    if (tally === undefined) {
      tally = { decisions: 0, cachedTokens: 0, uncachedTokens: 0, spills: 0 };
      this.replicaTally.set(d.replica, tally);
    }
    tally.decisions++;
    tally.cachedTokens += d.cachedTokens;
    tally.uncachedTokens += d.uncachedTokens;
    if (d.spilled) tally.spills++;
  }

  /** A request refused by admission control (the 429 itself is counted when it closes). */
  /**
   * With `--nats`: the messages from peers dropped (`malformed`: too large, not JSON, a field
   * missing or out of range) and the claims refused (`refused`: past a bound, about another
   * owner's entries, a snapshot or goodbye without the peer's proof), read at scrape time.
   */
  followSync(stats: () => { malformed: number; refused: number }): void {
    new Counter({
      name: 'kvroute_sync_dropped_total',
      help: 'Messages from NATS peers dropped (malformed) or claims refused (refused)',
      labelNames: ['reason'],
      registers: [this.registry],
      collect() {
        const s = stats();
        this.reset();
        this.inc({ reason: 'malformed' }, s.malformed);
        this.inc({ reason: 'refused' }, s.refused);
      },
    });
  }

  recordRejection(limit: string, tenant: string | null): void {
    this.rejections.series(limit, this.tenantLabel(tenant)).inc();
  }

  /**
   * Counts a generate request and observes its latencies once its response is over, whatever
   * ended it: a whole answer, an error of the gateway's own, or the client leaving.
   */
  watchRequest(
    endpoint: string,
    res: ServerResponse,
    record: RequestRecord,
    arrivedMs: number,
  ): void {
    res.once('close', () => {
      const model = this.modelLabel(record.model);
      const tenant = this.tenantLabel(record.tenant);
      const status = res.headersSent ? res.statusCode : CLIENT_CLOSED_STATUS;
      this.requests.series(endpoint, String(status), model, tenant).inc();
      if (record.preUpstreamMs !== null) {
        this.preUpstreamSeconds.series(model, tenant).observe(record.preUpstreamMs / 1000);
        this.e2eSeconds.series(model, tenant).observe((performance.now() - arrivedMs) / 1000);
      }
      if (record.ttftMs !== null) {
        const replica = record.replica ?? 'none';
        this.ttftSeconds.series(model, tenant, replica).observe(record.ttftMs / 1000);
        this.recentTtft.add(performance.now(), record.ttftMs / 1000);
      }
    });
  }

  tenantLabel(tenant: string | null): string {
    if (tenant === null) return 'none';
    return this.#knownTenants.has(tenant) ? tenant : 'other';
  }

  modelLabel(model: string | null): string {
    if (model === null) return 'none';
    if (this.#models.has(model)) return model;
    if (this.#models.size >= MAX_MODEL_LABELS) return 'other';
    this.#models.add(model);
    return model;
  }
}
