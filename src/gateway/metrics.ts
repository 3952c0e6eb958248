/**
 * The gateway's own Prometheus metrics, in a registry of its own (several gateways can live in
 * one process, as the tests do). Per-replica gauges are read from the router when scraped, so
 * the hot path only bumps counters.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RouteDecision } from '../router/index.ts';

export interface ReplicaGaugeSource {
  /** Per replica: name, queued prompt tokens (router ledger), up or down. */
  replicaLoads(): { name: string; queuedPromptTokens: number; up: boolean; inFlight: number }[];
}

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly decisions: Counter<'policy' | 'replica'>;
  readonly promptTokens: Counter<'kind'>;
  readonly spills: Counter<'policy'>;
  readonly failOpen: Counter<'policy'>;
  readonly retries: Counter;
  readonly requests: Counter<'endpoint' | 'status'>;
  readonly brokenStreams: Counter;
  readonly clientAborts: Counter;
  readonly decisionSeconds: Histogram;
  /** Label children by label values: the hot path bumps them without hashing label objects. */
  readonly #children = new Map<Counter<string>, Map<string, Counter.Internal>>();
  readonly #cachedTokens: Counter.Internal;
  readonly #uncachedTokens: Counter.Internal;

  constructor(source: ReplicaGaugeSource) {
    const registers = [this.registry];
    this.decisions = new Counter({
      name: 'kvroute_gateway_decisions_total',
      help: 'Routing decisions, by policy and chosen replica',
      labelNames: ['policy', 'replica'],
      registers,
    });
    this.promptTokens = new Counter({
      name: 'kvroute_gateway_prompt_tokens_routed_total',
      help: 'Prompt tokens routed, by whether the chosen replica had them cached',
      labelNames: ['kind'],
      registers,
    });
    this.spills = new Counter({
      name: 'kvroute_gateway_spills_total',
      help: 'Requests sent away from the replica holding their longest prefix',
      labelNames: ['policy'],
      registers,
    });
    this.failOpen = new Counter({
      name: 'kvroute_gateway_fail_open_total',
      help: 'Decisions made with every replica filtered out (the filters were relaxed)',
      labelNames: ['policy'],
      registers,
    });
    this.retries = new Counter({
      name: 'kvroute_gateway_retries_total',
      help: 'Attempts repeated on another replica after a refused or reset connection',
      registers,
    });
    this.requests = new Counter({
      name: 'kvroute_gateway_requests_total',
      help: 'Requests answered, by endpoint and status',
      labelNames: ['endpoint', 'status'],
      registers,
    });
    this.brokenStreams = new Counter({
      name: 'kvroute_gateway_broken_streams_total',
      help: 'Responses cut by a backend failure after bytes reached the client',
      registers,
    });
    this.clientAborts = new Counter({
      name: 'kvroute_gateway_client_aborts_total',
      help: 'Requests whose client left before the response ended',
      registers,
    });
    this.decisionSeconds = new Histogram({
      name: 'kvroute_gateway_decision_seconds',
      help: 'Time to choose a replica (tokenize excluded)',
      buckets: [1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3],
      registers,
    });
    this.#cachedTokens = this.promptTokens.labels('cached');
    this.#uncachedTokens = this.promptTokens.labels('uncached');
    new Gauge({
      name: 'kvroute_gateway_replica_queued_prompt_tokens',
      help: 'Uncached prompt tokens assigned to the replica whose first token has not come back',
      labelNames: ['replica'],
      registers,
      collect() {
        for (const r of source.replicaLoads()) this.set({ replica: r.name }, r.queuedPromptTokens);
      },
    });
    new Gauge({
      name: 'kvroute_gateway_replica_in_flight',
      help: 'Requests in flight on the replica',
      labelNames: ['replica'],
      registers,
      collect() {
        for (const r of source.replicaLoads()) this.set({ replica: r.name }, r.inFlight);
      },
    });
    new Gauge({
      name: 'kvroute_gateway_replica_up',
      help: '1 when the replica is taking traffic, 0 while marked down',
      labelNames: ['replica'],
      registers,
      collect() {
        for (const r of source.replicaLoads()) this.set({ replica: r.name }, r.up ? 1 : 0);
      },
    });
  }

  /** One routing decision and how long it took. */
  recordDecision(d: RouteDecision, seconds: number): void {
    this.decisionSeconds.observe(seconds);
    this.#child(this.decisions, d.policy, d.replica).inc();
    this.#cachedTokens.inc(d.cachedTokens);
    this.#uncachedTokens.inc(d.uncachedTokens);
    if (d.spilled) this.#child(this.spills, d.policy).inc();
    if (d.failedOpen) this.#child(this.failOpen, d.policy).inc();
  }

  /** A response that went to the client whole, with the backend's status. */
  recordAnswer(endpoint: string, status: number): void {
    this.#child(this.requests, endpoint, String(status)).inc();
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
