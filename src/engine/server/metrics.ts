/**
 * /metrics in Prometheus text format, with vLLM's metric names, labels and buckets
 * (`vllm/v1/metrics/loggers.py`, PrometheusStatLogger), so scrapers and dashboards written for
 * vLLM read this engine unchanged. Each server has its own prom-client Registry: several engines
 * can live in one process (a gateway's in-process fleet).
 *
 * Counters carry the `_total` suffix that Python's prometheus_client adds to vLLM's names on
 * exposition (`vllm:prompt_tokens` is scraped as `vllm:prompt_tokens_total`).
 *
 * Labels: `model_name` (the first served name) and `engine` ("0") on every vLLM metric, plus
 * `finished_reason` on request_success, whose series exist from the start for every reason, as
 * vLLM creates them. `vllm:cache_config_info` has the cache config's fields as labels and
 * `engine`, no `model_name` (vLLM's info gauge), so it lives in a registry of its own.
 *
 * With LoRA on, `vllm:lora_requests_info` (also without the default labels) has the labels
 * `max_lora`, `waiting_lora_adapters` and `running_lora_adapters` (adapter names joined by
 * commas, in the order they appeared) and the time of the scrape in seconds as its value, as
 * vLLM's `set_to_current_time()`; every adapter set seen keeps its series with the time it was
 * last current, so a reader takes the series with the largest value.
 *
 * Gauges and counters are read from the core's counters at scrape time (`refresh`), so a scrape
 * shows exactly the scheduler's queues. Latency histograms are in modeled seconds (wall-clock
 * seconds x speedup): at --speedup 1 they are what a client measures, and at higher speedups they
 * still describe the simulated hardware. kvroute's own step-lag histogram is in wall-clock
 * seconds (it measures the driver, not the model); its name follows Prometheus's rules (colons
 * are for recording rules), unlike vLLM's.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineCounters } from '../types.ts';

/** vLLM's buckets (vllm/v1/metrics/loggers.py). */
export const TTFT_BUCKETS_S = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0, 160.0, 640.0, 2560.0,
];
export const ITL_BUCKETS_S = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0,
];
/** vLLM's `request_latency_buckets`: e2e, queue, inference, prefill and decode times. */
export const REQUEST_LATENCY_BUCKETS_S = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
  480.0, 960.0, 1920.0, 7680.0,
];
export const ITERATION_TOKENS_BUCKETS = [
  1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
];
export const PARAMS_N_BUCKETS = [1, 2, 5, 10, 20];
/** vLLM's FINISH_REASON_STRINGS (vllm/v1/engine/__init__.py). */
export const FINISH_REASONS = ['stop', 'length', 'abort', 'error', 'repetition'] as const;
export type FinishReason = (typeof FINISH_REASONS)[number];

/** vLLM's `build_1_2_5_buckets(max_value)`: 1, 2, 5, 10, 20, 50, ... up to max_value. */
export function build125Buckets(maxValue: number): number[] {
  const out: number[] = [];
  for (let exponent = 1; ; exponent *= 10) {
    for (const mantissa of [1, 2, 5]) {
      const value = mantissa * exponent;
      if (value > maxValue) return out;
      out.push(value);
    }
  }
}

/** Fine below a millisecond, where a healthy driver's lag lives. */
export const STEP_LAG_BUCKETS_S = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05,
  0.1, 0.25, 0.5, 1,
];

export const STEP_LAG_METRIC = 'kvroute_engine_step_lag_seconds';

type CounterName = Exclude<
  keyof EngineCounters,
  | 'running'
  | 'waiting'
  | 'kvUsage'
  | 'kvBlocksTotal'
  | 'kvBlocksFree'
  | 'lora'
  | 'kvTransfer'
  | 'cpuOffload'
>;

/**
 * The CacheConfig fields this engine has a value for, as vLLM's `metrics_info()` renders them
 * (Python `str()`: "True", "None", "0.92").
 */
export interface CacheConfigInfo {
  blockSize: number;
  gpuMemoryUtilization: number;
  /** vLLM's cache_dtype: "auto" (the model's dtype) or "fp8". */
  cacheDtype: string;
  enablePrefixCaching: boolean;
  numGpuBlocks: number;
  /** --num-gpu-blocks-override (kvroute's --kv-blocks), null when the pool is sized by memory. */
  numGpuBlocksOverride: number | null;
}

const py = (v: number | string | boolean | null): string =>
  v === null ? 'None' : typeof v === 'boolean' ? (v ? 'True' : 'False') : String(v);

/** Timestamps of one request, on one clock, in ms (null: it did not get there). */
export interface RequestTimes {
  arrivalMs: number;
  scheduledMs: number | null;
  firstTokenMs: number | null;
  lastTokenMs: number | null;
}

export interface FinishedRequestStats {
  times: RequestTimes;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  reason: FinishReason;
}

export interface EngineMetricsOptions {
  modelName: string;
  engine: string;
  maxModelLen: number;
  cacheConfig: CacheConfigInfo;
  /** Wall-clock ms -> modeled seconds (x speedup). */
  toModeledS: (wallMs: number) => number;
  /** Export `vllm:lora_requests_info` (LoRA on). */
  lora?: boolean;
  /** Seconds since the epoch, the LoRA gauge's value (injected for tests; default Date.now). */
  nowS?: () => number;
}

/** Stands for 1-2-5 token buckets up to the model's length in HISTOGRAMS. */
const TOKENS = 'tokens';

/** vLLM's request and step histograms (key, name, help, buckets), registered in this order. */
const HISTOGRAMS = [
  ['promptTokens', 'vllm:request_prompt_tokens', 'Number of prefill tokens processed.', TOKENS],
  [
    'generationTokens',
    'vllm:request_generation_tokens',
    'Number of generation tokens processed.',
    TOKENS,
  ],
  [
    'iterationTokens',
    'vllm:iteration_tokens_total',
    'Histogram of number of tokens per engine_step.',
    ITERATION_TOKENS_BUCKETS,
  ],
  [
    'maxGenerationTokens',
    'vllm:request_max_num_generation_tokens',
    'Histogram of maximum number of requested generation tokens.',
    TOKENS,
  ],
  ['paramsN', 'vllm:request_params_n', 'Histogram of the n request parameter.', PARAMS_N_BUCKETS],
  [
    'paramsMaxTokens',
    'vllm:request_params_max_tokens',
    'Histogram of the max_tokens request parameter.',
    TOKENS,
  ],
  [
    'ttft',
    'vllm:time_to_first_token_seconds',
    'Histogram of time to first token in seconds.',
    TTFT_BUCKETS_S,
  ],
  [
    'itl',
    'vllm:inter_token_latency_seconds',
    'Histogram of inter-token latency in seconds.',
    ITL_BUCKETS_S,
  ],
  [
    'tpot',
    'vllm:request_time_per_output_token_seconds',
    'Histogram of time_per_output_token_seconds per request.',
    ITL_BUCKETS_S,
  ],
  [
    'e2e',
    'vllm:e2e_request_latency_seconds',
    'Histogram of e2e request latency in seconds.',
    REQUEST_LATENCY_BUCKETS_S,
  ],
  [
    'queue',
    'vllm:request_queue_time_seconds',
    'Histogram of time spent in WAITING phase for request.',
    REQUEST_LATENCY_BUCKETS_S,
  ],
  [
    'inference',
    'vllm:request_inference_time_seconds',
    'Histogram of time spent in RUNNING phase for request.',
    REQUEST_LATENCY_BUCKETS_S,
  ],
  [
    'prefill',
    'vllm:request_prefill_time_seconds',
    'Histogram of time spent in PREFILL phase for request.',
    REQUEST_LATENCY_BUCKETS_S,
  ],
  [
    'decode',
    'vllm:request_decode_time_seconds',
    'Histogram of time spent in DECODE phase for request.',
    REQUEST_LATENCY_BUCKETS_S,
  ],
  [
    'kvComputedTokens',
    'vllm:request_prefill_kv_computed_tokens',
    'Histogram of new KV tokens computed during prefill (excluding cached tokens).',
    TOKENS,
  ],
  [
    'stepLag',
    STEP_LAG_METRIC,
    'How late each engine step started against its schedule, wall-clock seconds.',
    STEP_LAG_BUCKETS_S,
  ],
] as const;

type HistogramKey = (typeof HISTOGRAMS)[number][0];

function requestHistograms(
  registers: Registry[],
  maxModelLen: number,
): Record<HistogramKey, Histogram> {
  const tokens125 = build125Buckets(maxModelLen);
  const histograms = {} as Record<HistogramKey, Histogram>;
  for (const [key, name, help, buckets] of HISTOGRAMS) {
    histograms[key] = new Histogram({
      name,
      help,
      buckets: buckets === TOKENS ? tokens125 : buckets,
      registers,
    });
  }
  return histograms;
}

type RequestHistograms = Record<HistogramKey, Histogram>;

/** vLLM's engine counters that follow the core's own, registered in this order. */
function engineCounters(registers: Registry[]): Record<CounterName, Counter> {
  const counter = (name: string, help: string) => new Counter({ name, help, registers });
  return {
    prefixCacheQueriesTokens: counter(
      'vllm:prefix_cache_queries_total',
      'Prefix cache queries, in terms of number of queried tokens.',
    ),
    prefixCacheHitsTokens: counter(
      'vllm:prefix_cache_hits_total',
      'Prefix cache hits, in terms of number of cached tokens.',
    ),
    preemptions: counter(
      'vllm:num_preemptions_total',
      'Cumulative number of preemption from the engine.',
    ),
    promptTokens: counter('vllm:prompt_tokens_total', 'Number of prefill tokens processed.'),
    generationTokens: counter(
      'vllm:generation_tokens_total',
      'Number of generation tokens processed.',
    ),
  };
}

/** `vllm:cache_config_info`'s labels, as vLLM writes them (Python's spelling of values). */
function cacheConfigLabels(options: EngineMetricsOptions): Record<string, string> {
  const c = options.cacheConfig;
  return {
    block_size: py(c.blockSize),
    gpu_memory_utilization: py(c.gpuMemoryUtilization),
    cache_dtype: c.cacheDtype,
    enable_prefix_caching: py(c.enablePrefixCaching),
    num_gpu_blocks: py(c.numGpuBlocks),
    num_gpu_blocks_override: py(c.numGpuBlocksOverride),
    num_cpu_blocks: py(null),
    sliding_window: py(null),
    is_attention_free: py(false),
    cpu_offload_gb: py(0),
    engine: options.engine,
  };
}

export class EngineMetrics {
  readonly registry = new Registry();
  /** Metrics without vLLM's default labels (the info gauge). */
  readonly #infoRegistry = new Registry();
  readonly #toModeledS: (wallMs: number) => number;
  readonly #running: Gauge;
  readonly #waiting: Gauge;
  readonly #kvUsage: Gauge;
  readonly #counters: Record<CounterName, Counter>;
  readonly #seen: Record<CounterName, number>;
  readonly #success: Counter<'finished_reason'>;
  /** vLLM's offloading connector counter, made at the first report of a CPU tier. */
  #offloadBytes: Counter<'transfer_type'> | null = null;
  #offloadSeen = { CPU_to_GPU: 0, GPU_to_CPU: 0 };
  #externalQueries: Counter | null = null;
  #externalHits: Counter | null = null;
  #externalSeen = { queries: 0, hits: 0 };
  readonly #cachedPromptTokens: Counter;
  readonly #histograms: RequestHistograms;
  readonly #loraInfo: Gauge<'max_lora' | 'waiting_lora_adapters' | 'running_lora_adapters'> | null;
  readonly #nowS: () => number;

  constructor(options: EngineMetricsOptions) {
    const registers = [this.registry];
    this.#toModeledS = options.toModeledS;
    this.registry.setDefaultLabels({ model_name: options.modelName, engine: options.engine });
    const gauge = (name: string, help: string) => new Gauge({ name, help, registers });
    const counter = (name: string, help: string) => new Counter({ name, help, registers });

    this.#running = gauge(
      'vllm:num_requests_running',
      'Number of requests in model execution batches.',
    );
    this.#waiting = gauge(
      'vllm:num_requests_waiting',
      'Number of requests waiting to be processed.',
    );
    this.#kvUsage = gauge('vllm:kv_cache_usage_perc', 'KV-cache usage. 1 means 100 percent usage.');
    this.#counters = engineCounters(registers);
    this.#seen = {
      prefixCacheQueriesTokens: 0,
      prefixCacheHitsTokens: 0,
      promptTokens: 0,
      generationTokens: 0,
      preemptions: 0,
    };
    this.#cachedPromptTokens = counter(
      'vllm:prompt_tokens_cached_total',
      'Number of cached prompt tokens (local + external).',
    );
    this.#success = new Counter({
      name: 'vllm:request_success_total',
      help: 'Count of successfully processed requests.',
      labelNames: ['finished_reason'],
      registers,
    });
    for (const reason of FINISH_REASONS) this.#success.labels(reason).inc(0);
    this.#histograms = requestHistograms(registers, options.maxModelLen);

    this.#nowS = options.nowS ?? (() => Date.now() / 1000);
    this.#loraInfo = options.lora
      ? new Gauge({
          name: 'vllm:lora_requests_info',
          help: 'Running stats on lora requests.',
          labelNames: ['max_lora', 'waiting_lora_adapters', 'running_lora_adapters'],
          registers: [this.#infoRegistry],
        })
      : null;

    const info = cacheConfigLabels(options);
    new Gauge({
      name: 'vllm:cache_config_info',
      help: 'Information of the LLMEngine CacheConfig',
      labelNames: Object.keys(info),
      registers: [this.#infoRegistry],
    }).set(info, 1);
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
    if (c.cpuOffload) this.#refreshOffload(c.cpuOffload);
    if (this.#loraInfo && c.lora) {
      this.#loraInfo.set(
        {
          max_lora: String(c.lora.maxLoras),
          waiting_lora_adapters: c.lora.waiting.join(','),
          running_lora_adapters: c.lora.running.join(','),
        },
        this.#nowS(),
      );
    }
  }

  /**
   * `vllm:kv_offload_total_bytes_total{transfer_type}` as vLLM's OffloadPromMetrics names it
   * (vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py): bytes loaded back
   * (CPU_to_GPU) and written to the tier (GPU_to_CPU).
   */
  #refreshOffload(o: NonNullable<EngineCounters['cpuOffload']>): void {
    this.#offloadBytes ??= new Counter({
      // prometheus_client adds _total to vLLM's counter name; prom-client takes it as given.
      name: 'vllm:kv_offload_total_bytes_total',
      help: 'Number of bytes offloaded by KV connector',
      labelNames: ['transfer_type'],
      registers: [this.registry],
    });
    // The connector's prefix-cache counters, vLLM's names and help text
    // (vllm/v1/metrics/loggers.py, counter_connector_prefix_cache_queries / _hits): the tier's
    // hits are counted here, not in vllm:prefix_cache_hits_total.
    this.#externalQueries ??= new Counter({
      name: 'vllm:external_prefix_cache_queries_total',
      help: 'External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.',
      registers: [this.registry],
    });
    this.#externalHits ??= new Counter({
      name: 'vllm:external_prefix_cache_hits_total',
      help: 'External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.',
      registers: [this.registry],
    });
    this.#externalQueries.inc(Math.max(0, o.externalQueriesTokens - this.#externalSeen.queries));
    this.#externalHits.inc(Math.max(0, o.externalHitsTokens - this.#externalSeen.hits));
    this.#externalSeen = { queries: o.externalQueriesTokens, hits: o.externalHitsTokens };
    const now = { CPU_to_GPU: o.loadedBytes, GPU_to_CPU: o.storedBytes };
    for (const type of ['CPU_to_GPU', 'GPU_to_CPU'] as const) {
      const delta = now[type] - this.#offloadSeen[type];
      this.#offloadBytes.labels(type).inc(Math.max(0, delta));
      this.#offloadSeen[type] = now[type];
    }
  }

  observeTtft(seconds: number): void {
    this.#histograms.ttft.observe(seconds);
  }

  observeItl(seconds: number): void {
    this.#histograms.itl.observe(seconds);
  }

  observeStepLag(seconds: number): void {
    this.#histograms.stepLag.observe(seconds);
  }

  /** One engine step's computed tokens, prefill and decode (vLLM: tokens per engine_step). */
  observeIteration(tokens: number): void {
    if (tokens > 0) this.#histograms.iterationTokens.observe(tokens);
  }

  /** An API request's parameters (once per request, whatever its n). */
  observeParams(n: number, maxTokens: number): void {
    this.#histograms.paramsN.observe(n);
    this.#histograms.paramsMaxTokens.observe(maxTokens);
    this.#histograms.maxGenerationTokens.observe(maxTokens);
  }

  /** One engine request (one choice of an API request) finished, as vLLM records it. */
  requestFinished(r: FinishedRequestStats): void {
    this.#success.inc({ finished_reason: r.reason });
    const { arrivalMs, scheduledMs, firstTokenMs, lastTokenMs } = r.times;
    const seconds = (fromMs: number, toMs: number) => this.#toModeledS(Math.max(0, toMs - fromMs));
    const endMs = lastTokenMs ?? firstTokenMs ?? scheduledMs ?? arrivalMs;
    this.#histograms.e2e.observe(seconds(arrivalMs, endMs));
    this.#histograms.promptTokens.observe(r.promptTokens);
    this.#histograms.generationTokens.observe(r.outputTokens);
    this.#cachedPromptTokens.inc(r.cachedTokens);
    if (scheduledMs !== null) {
      this.#histograms.queue.observe(seconds(arrivalMs, scheduledMs));
      this.#histograms.inference.observe(seconds(scheduledMs, endMs));
      this.#histograms.kvComputedTokens.observe(Math.max(0, r.promptTokens - r.cachedTokens));
      if (firstTokenMs !== null)
        this.#histograms.prefill.observe(seconds(scheduledMs, firstTokenMs));
    }
    if (firstTokenMs !== null && lastTokenMs !== null) {
      this.#histograms.decode.observe(seconds(firstTokenMs, lastTokenMs));
      if (r.outputTokens > 1) {
        this.#histograms.tpot.observe(seconds(firstTokenMs, lastTokenMs) / (r.outputTokens - 1));
      }
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  async text(counters: EngineCounters): Promise<string> {
    this.refresh(counters);
    return (await this.registry.metrics()) + (await this.#infoRegistry.metrics());
  }
}
