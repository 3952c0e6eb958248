/**
 * The gateway's own Prometheus metrics, in a registry of its own (several gateways can live in
 * one process, as the tests do). Per-replica gauges are read from the router when scraped, so
 * the hot path only bumps counters.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RouteDecision } from '../router/index.ts';
import type { TokenizerAgreement } from './tokenizerCheck.ts';

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
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly decisions: Counter<'policy' | 'replica' | 'model'>;
  readonly promptTokens: Counter<'kind' | 'model'>;
  readonly spills: Counter<'policy' | 'model'>;
  readonly failOpen: Counter<'policy' | 'model'>;
  readonly retries: Counter;
  readonly remoteTokenizeFallbacks: Counter;
  readonly requests: Counter<'endpoint' | 'status' | 'model'>;
  readonly brokenStreams: Counter;
  readonly clientAborts: Counter;
  readonly decisionSeconds: Histogram;
  /** Label children by label values: the hot path bumps them without hashing label objects. */
  readonly #children = new Map<Counter<string>, Map<string, Counter.Internal>>();

  constructor(source: ReplicaGaugeSource) {
    const registers = [this.registry];
    const counter = <T extends string = never>(name: string, help: string, labelNames: T[] = []) =>
      new Counter<T>({ name, help, labelNames, registers });
    /** A per-replica gauge read from the router at scrape time. */
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

    this.decisions = counter(
      'kvroute_gateway_decisions_total',
      'Routing decisions, by policy, chosen replica and model',
      ['policy', 'replica', 'model'],
    );
    this.promptTokens = counter(
      'kvroute_gateway_prompt_tokens_routed_total',
      'Prompt tokens routed, by whether the chosen replica had them cached, and model',
      ['kind', 'model'],
    );
    this.spills = counter(
      'kvroute_gateway_spills_total',
      'Requests sent away from the replica holding their longest prefix',
      ['policy', 'model'],
    );
    this.failOpen = counter(
      'kvroute_gateway_fail_open_total',
      'Decisions made with every replica filtered out (the filters were relaxed)',
      ['policy', 'model'],
    );
    this.retries = counter(
      'kvroute_gateway_retries_total',
      'Attempts repeated on another replica after a refused or reset connection',
    );
    this.remoteTokenizeFallbacks = counter(
      'kvroute_gateway_remote_tokenize_fallbacks_total',
      'Requests tokenized locally because no backend /tokenize answered (--tokenize remote)',
    );
    this.requests = counter(
      'kvroute_gateway_requests_total',
      'Requests answered, by endpoint, status and model',
      ['endpoint', 'status', 'model'],
    );
    this.brokenStreams = counter(
      'kvroute_gateway_broken_streams_total',
      'Responses cut by a backend failure after bytes reached the client',
    );
    this.clientAborts = counter(
      'kvroute_gateway_client_aborts_total',
      'Requests whose client left before the response ended',
    );
    this.decisionSeconds = new Histogram({
      name: 'kvroute_gateway_decision_seconds',
      help: 'Time to choose a replica (tokenize excluded)',
      buckets: [1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3],
      registers,
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

  /** One routing decision in the pool of `model`, and how long it took. */
  recordDecision(d: RouteDecision, seconds: number, model = ''): void {
    this.decisionSeconds.observe(seconds);
    this.#child(this.decisions, d.policy, d.replica, model).inc();
    this.#child(this.promptTokens, 'cached', model).inc(d.cachedTokens);
    this.#child(this.promptTokens, 'uncached', model).inc(d.uncachedTokens);
    if (d.spilled) this.#child(this.spills, d.policy, model).inc();
    if (d.failedOpen) this.#child(this.failOpen, d.policy, model).inc();
  }

  /** A response that went to the client whole, with the backend's status. */
  recordAnswer(endpoint: string, status: number, model = ''): void {
    this.#child(this.requests, endpoint, String(status), model).inc();
  }

  #child<T extends string>(counter: Counter<T>, ...values: string[]): Counter.Internal {
    let byValues = this.#children.get(counter);
    if (!byValues) {
      byValues = new Map();
      this.#children.set(counter, byValues);
    }
    const key = values.join('\u0000');
    let child = byValues.get(key);
    if (!child) {
      child = counter.labels(...values);
      byValues.set(key, child);
    }
    return child;
  }
}
