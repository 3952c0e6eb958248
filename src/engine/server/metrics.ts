/**
 * /metrics in Prometheus text format, with vLLM's metric names and its `model_name` and `engine`
 * labels, so scrapers written for vLLM read this engine unchanged. Each server has its own
 * prom-client Registry: several engines can live in one process (a gateway's in-process fleet).
 *
 * Gauges and counters are read from the core's counters at scrape time (`refresh`), so a scrape
 * shows exactly the scheduler's queues. Latency histograms are in modeled seconds (wall-clock
 * seconds x speedup): at --speedup 1 they are what a client measures, and at higher speedups they
 * still describe the simulated hardware. The step-lag histogram is in wall-clock seconds: it
 * measures the driver, not the model.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineCounters } from '../types.ts';

/** vLLM's buckets (vllm/v1/metrics/loggers.py). */
const TTFT_BUCKETS_S = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL_BUCKETS_S = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0,
];
const E2E_BUCKETS_S = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
  480.0, 960.0, 1920.0, 7680.0,
];
/** Fine below a millisecond, where a healthy driver's lag lives. */
export const STEP_LAG_BUCKETS_S = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05,
  0.1, 0.25, 0.5, 1,
];

export const STEP_LAG_METRIC = 'kvroute:engine_step_lag_seconds';

type CounterName = Exclude<
  keyof EngineCounters,
  'running' | 'waiting' | 'kvUsage' | 'kvBlocksTotal' | 'kvBlocksFree'
>;

export class EngineMetrics {
  readonly registry = new Registry();
  readonly #running: Gauge;
  readonly #waiting: Gauge;
  readonly #kvUsage: Gauge;
  readonly #counters: Record<CounterName, Counter>;
  readonly #seen: Record<CounterName, number>;
  readonly #success: Counter<'finished_reason'>;
  readonly #ttft: Histogram;
  readonly #itl: Histogram;
  readonly #e2e: Histogram;
  readonly #stepLag: Histogram;

  constructor(labels: { modelName: string; engine: string }) {
    const registers = [this.registry];
    this.registry.setDefaultLabels({ model_name: labels.modelName, engine: labels.engine });
    const gauge = (name: string, help: string) => new Gauge({ name, help, registers });
    const counter = (name: string, help: string) => new Counter({ name, help, registers });
    const histogram = (name: string, help: string, buckets: number[]) =>
      new Histogram({ name, help, buckets, registers });

    this.#running = gauge(
      'vllm:num_requests_running',
      'Number of requests in model execution batches.',
    );
    this.#waiting = gauge(
      'vllm:num_requests_waiting',
      'Number of requests waiting to be processed.',
    );
    this.#kvUsage = gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.');
    this.#counters = {
      prefixCacheQueriesTokens: counter(
        'vllm:prefix_cache_queries_total',
        'Prefix cache queries, in terms of number of queried tokens.',
      ),
      prefixCacheHitsTokens: counter(
        'vllm:prefix_cache_hits_total',
        'Prefix cache hits, in terms of number of cached tokens.',
      ),
      promptTokens: counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.'),
      generationTokens: counter(
        'vllm:generation_tokens_total',
        'Number of generation tokens processed.',
      ),
      preemptions: counter(
        'vllm:num_preemptions_total',
        'Cumulative number of preemptions from the engine.',
      ),
    };
    this.#seen = {
      prefixCacheQueriesTokens: 0,
      prefixCacheHitsTokens: 0,
      promptTokens: 0,
      generationTokens: 0,
      preemptions: 0,
    };
    this.#success = new Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: ['finished_reason'],
      registers,
    });
    this.#ttft = histogram(
      'vllm:time_to_first_token_seconds',
      'Histogram of time to first token in seconds.',
      TTFT_BUCKETS_S,
    );
    this.#itl = histogram(
      'vllm:inter_token_latency_seconds',
      'Histogram of inter-token latency in seconds.',
      ITL_BUCKETS_S,
    );
    this.#e2e = histogram(
      'vllm:e2e_request_latency_seconds',
      'Histogram of e2e request latency in seconds.',
      E2E_BUCKETS_S,
    );
    this.#stepLag = histogram(
      STEP_LAG_METRIC,
      'How late each engine step started against its schedule, wall-clock seconds.',
      STEP_LAG_BUCKETS_S,
    );
  }

  /** Copies the core's counters into the gauges and advances the counters by what is new. */
  refresh(c: EngineCounters): void {
    this.#running.set(c.running);
    this.#waiting.set(c.waiting);
    this.#kvUsage.set(c.kvUsage);
    for (const name of Object.keys(this.#counters) as CounterName[]) {
      const delta = c[name] - this.#seen[name];
      if (delta > 0) this.#counters[name].inc(delta);
      // A core reset starts its counters over; Prometheus counters never go back.
      this.#seen[name] = c[name];
    }
  }

  observeTtft(seconds: number): void {
    this.#ttft.observe(seconds);
  }

  observeItl(seconds: number): void {
    this.#itl.observe(seconds);
  }

  observeE2e(seconds: number): void {
    this.#e2e.observe(seconds);
  }

  observeStepLag(seconds: number): void {
    this.#stepLag.observe(seconds);
  }

  requestFinished(reason: 'length' | 'abort'): void {
    if (reason === 'length') this.#success.inc({ finished_reason: 'length' });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  async text(counters: EngineCounters): Promise<string> {
    this.refresh(counters);
    return this.registry.metrics();
  }
}
