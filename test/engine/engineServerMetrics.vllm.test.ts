/**
 * The engine's /metrics read as a Prometheus scraper reads it (a text-format parser below) and
 * checked against vLLM's own list (vllm/v1/metrics/loggers.py, PrometheusStatLogger): names,
 * types, labels and bucket bounds; request_success's series from the start; the request phase
 * histograms after requests ran.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, startTestEngine } from '../support/engineServerHelpers.ts';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Family {
  type: string;
  samples: Sample[];
}

/** A sample value or bucket bound: Go's float syntax, with +Inf, -Inf and NaN. */
const float = (s: string): number =>
  s === '+Inf' ? Number.POSITIVE_INFINITY : s === '-Inf' ? Number.NEGATIVE_INFINITY : Number(s);

/** Prometheus text exposition format 0.0.4: # TYPE lines and samples with escaped labels. */
function parsePrometheus(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const familyOf = (sample: string): Family | undefined => {
    for (const suffix of ['', '_bucket', '_sum', '_count']) {
      if (suffix && !sample.endsWith(suffix)) continue;
      const f = families.get(sample.slice(0, sample.length - suffix.length));
      if (f) return f;
    }
    return undefined;
  };
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('# HELP')) continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/.exec(line);
    if (type) {
      families.set(type[1]!, { type: type[2]!, samples: [] });
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not Prometheus text: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[k!] = v!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const family = familyOf(m[1]!);
    if (!family) throw new Error(`sample without a # TYPE: ${line}`);
    family.samples.push({ name: m[1]!, labels, value: float(m[3]!) });
  }
  return families;
}

// vLLM's buckets.
const TTFT = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
  40.0, 80.0,
];
const LATENCY = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
  480.0, 960.0, 1920.0, 7680.0,
];
const ITERATION = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];
/** build_1_2_5_buckets(max_model_len) for a 32,768-token window. */
const TOKENS_125 = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000];

const GAUGES = [
  'vllm:num_requests_running',
  'vllm:num_requests_waiting',
  'vllm:kv_cache_usage_perc',
];
const COUNTERS = [
  'vllm:prefix_cache_queries_total',
  'vllm:prefix_cache_hits_total',
  'vllm:num_preemptions_total',
  'vllm:prompt_tokens_total',
  'vllm:prompt_tokens_cached_total',
  'vllm:generation_tokens_total',
  'vllm:request_success_total',
];
const HISTOGRAMS: Record<string, number[]> = {
  'vllm:time_to_first_token_seconds': TTFT,
  'vllm:inter_token_latency_seconds': ITL,
  'vllm:request_time_per_output_token_seconds': ITL,
  'vllm:e2e_request_latency_seconds': LATENCY,
  'vllm:request_queue_time_seconds': LATENCY,
  'vllm:request_inference_time_seconds': LATENCY,
  'vllm:request_prefill_time_seconds': LATENCY,
  'vllm:request_decode_time_seconds': LATENCY,
  'vllm:iteration_tokens_total': ITERATION,
  'vllm:request_prompt_tokens': TOKENS_125,
  'vllm:request_generation_tokens': TOKENS_125,
  'vllm:request_max_num_generation_tokens': TOKENS_125,
  'vllm:request_params_max_tokens': TOKENS_125,
  'vllm:request_prefill_kv_computed_tokens': TOKENS_125,
  'vllm:request_params_n': [1, 2, 5, 10, 20],
};

async function scrape(server: EngineServerHandle): Promise<Map<string, Family>> {
  return parsePrometheus(await (await fetch(`${server.url}/metrics`)).text());
}

const VLLM_LABELS = { model_name: 'served-70b', engine: '0' };

test("/metrics: vLLM's names, types, labels and buckets; request phases observed", async () => {
  const server = await startTestEngine({
    servedModelName: 'served-70b',
    maxModelLen: 32_768,
    memoryUtilization: 0.9,
    kvBlocks: 4096,
  });
  try {
    const before = await scrape(server);
    // Every family is vLLM's (`vllm:`) or kvroute's own, in Prometheus' plain form (`kvroute_`):
    // kvroute never writes into vLLM's colon namespace style with a name of its own.
    const families = [...before.keys()];
    assert.ok(families.length >= GAUGES.length + COUNTERS.length, `${families.length} families`);
    for (const name of families) {
      assert.match(name, /^(vllm:[a-z0-9_]+|kvroute_[a-z0-9_]+)$/, name);
      assert.ok(!name.startsWith('kvroute:'), name);
    }
    assert.ok(
      families.some((name) => name.startsWith('kvroute_')),
      'kvroute_engine_step_lag_seconds',
    );
    const expected: [string, string][] = [
      ...GAUGES.map((n): [string, string] => [n, 'gauge']),
      ...COUNTERS.map((n): [string, string] => [n, 'counter']),
      ...Object.keys(HISTOGRAMS).map((n): [string, string] => [n, 'histogram']),
      ['vllm:cache_config_info', 'gauge'],
      ['kvroute_engine_step_lag_seconds', 'histogram'],
    ];
    for (const [name, type] of expected) {
      assert.equal(before.get(name)?.type, type, name);
    }
    for (const name of [...GAUGES, ...COUNTERS, ...Object.keys(HISTOGRAMS)]) {
      for (const s of before.get(name)!.samples) {
        const { le: _le, finished_reason: _r, ...labels } = s.labels;
        assert.deepEqual(labels, VLLM_LABELS, `${s.name} labels`);
      }
    }
    // request_success: a series per finished_reason from the start, as vLLM creates them.
    assert.deepEqual(
      before
        .get('vllm:request_success_total')!
        .samples.map((s) => [s.labels.finished_reason, s.value])
        .sort(),
      [
        ['abort', 0],
        ['error', 0],
        ['length', 0],
        ['repetition', 0],
        ['stop', 0],
      ],
    );
    for (const [name, bounds] of Object.entries(HISTOGRAMS)) {
      const les = before
        .get(name)!
        .samples.filter((s) => s.name.endsWith('_bucket'))
        .map((s) => float(s.labels.le!));
      assert.deepEqual(les, [...bounds, Number.POSITIVE_INFINITY], `${name} buckets`);
    }
    // The info gauge: CacheConfig's fields with Python's str(), and engine, no model_name.
    const [info] = before.get('vllm:cache_config_info')!.samples;
    assert.equal(info!.value, 1);
    assert.equal(info!.labels.model_name, undefined);
    assert.equal(info!.labels.engine, '0');
    assert.equal(info!.labels.block_size, '16');
    assert.equal(info!.labels.gpu_memory_utilization, '0.9');
    assert.equal(info!.labels.enable_prefix_caching, 'True');
    assert.equal(info!.labels.num_gpu_blocks, '4096');
    assert.equal(info!.labels.num_gpu_blocks_override, '4096');
    assert.equal(info!.labels.num_cpu_blocks, 'None');
    assert.equal(info!.labels.cache_dtype, 'auto');

    const client = clientFor(server);
    const prompt = Array.from({ length: 64 }, (_, i) => 500 + i);
    await client.completions.create({ model: 'served-70b', prompt, max_tokens: 5 });
    await client.completions.create({ model: 'served-70b', prompt, max_tokens: 5, n: 2 });
    const after = await scrape(server);
    const count = (name: string) =>
      after.get(name)!.samples.find((s) => s.name === `${name}_count`)!.value;
    const success = (reason: string) =>
      after
        .get('vllm:request_success_total')!
        .samples.find((s) => s.labels.finished_reason === reason)!.value;
    assert.equal(success('length'), 3, 'each choice is an engine request');
    for (const phase of ['queue', 'prefill', 'decode', 'inference']) {
      assert.equal(count(`vllm:request_${phase}_time_seconds`), 3, phase);
    }
    assert.equal(count('vllm:request_params_n'), 2);
    assert.ok(count('vllm:iteration_tokens_total') >= 5);
    const cached = after.get('vllm:prompt_tokens_cached_total')!.samples[0]!.value;
    assert.ok(cached >= 48, `the repeated prompt's full blocks were cached: ${cached}`);
  } finally {
    await server.close();
  }
});

test('--no-enable-prefix-caching: nothing cached, and the info gauge says so', async () => {
  const server = await startTestEngine({ prefixCaching: false });
  try {
    const client = clientFor(server);
    const prompt = Array.from({ length: 64 }, (_, i) => 900 + i);
    for (let i = 0; i < 2; i++) {
      const r = await client.completions.create({ model: 'llama-3.3-70b', prompt, max_tokens: 2 });
      assert.equal(r.usage?.prompt_tokens_details?.cached_tokens, 0);
    }
    const [info] = (await scrape(server)).get('vllm:cache_config_info')!.samples;
    assert.equal(info!.labels.enable_prefix_caching, 'False');
  } finally {
    await server.close();
  }
});
