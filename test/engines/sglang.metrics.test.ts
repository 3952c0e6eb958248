/**
 * SGLang's /metrics and /tokenize, read by the pure adapters in src/engines/sglang/: a page as
 * SGLang's SchedulerMetricsCollector exposes it (metrics/collector.py names, the scheduler's
 * labels), and /tokenize bodies and answers as entrypoints/openai/protocol.py defines them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSglangMetrics } from '../../src/engines/sglang/metrics.ts';
import {
  readSglangTokenizeResponse,
  sglangTokenizeRequest,
} from '../../src/engines/sglang/tokenize.ts';
import { parseBackendFlag } from '../../src/serving/config.ts';

const PAGE = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 4.0
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="1"} 4.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 3.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 0.25
sglang:num_queue_reqs_total 100
# HELP sglang:cache_hit_rate The prefix cache hit rate.
sglang:cache_hit_rate{engine_type="unified",model_name="m"} 0.5
vllm:num_requests_running 9
`;

test('SGLang gauges: TP ranks repeat one queue (max), usage 0..1', () => {
  assert.deepEqual(parseSglangMetrics(PAGE), { kvUsage: 0.25, running: 4, waiting: 3 });
});

test('data-parallel ranks have queues of their own: summed over dp_rank', () => {
  const page = [
    'sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="0"} 1',
    'sglang:num_running_reqs{dp_rank="0",model_name="m",tp_rank="1"} 1',
    'sglang:num_running_reqs{dp_rank="1",model_name="m",tp_rank="0"} 2',
    'sglang:num_queue_reqs{dp_rank="1",model_name="m"} 5',
    'sglang:token_usage{dp_rank="0",model_name="m"} 0.1',
    'sglang:token_usage{dp_rank="1",model_name="m"} 0.7',
  ].join('\n');
  assert.deepEqual(parseSglangMetrics(page), { kvUsage: 0.7, running: 3, waiting: 5 });
});

test('a page without SGLang gauges reads as null', () => {
  assert.equal(parseSglangMetrics('vllm:num_requests_running 3\n'), null);
  assert.equal(parseSglangMetrics(''), null);
});

test('/tokenize: text prompts pass, chat queries cannot be asked', () => {
  assert.deepEqual(sglangTokenizeRequest({ prompt: 'hi', model: 'm', add_special_tokens: false }), {
    prompt: 'hi',
    model: 'm',
    add_special_tokens: false,
  });
  assert.equal(sglangTokenizeRequest({ messages: [{ role: 'user', content: 'hi' }] }), null);
});

test('/tokenize answers: a flat list, a list of one list, and refusals', () => {
  assert.deepEqual(readSglangTokenizeResponse({ tokens: [1, 2], count: 2, max_model_len: 4096 }), {
    ids: [1, 2],
    maxModelLen: 4096,
  });
  assert.deepEqual(readSglangTokenizeResponse({ tokens: [[3]], count: [1], max_model_len: 8 }), {
    ids: [3],
    maxModelLen: 8,
  });
  assert.equal(readSglangTokenizeResponse({ tokens: [[1], [2]] }), null);
  assert.equal(readSglangTokenizeResponse({ detail: 'bad' }), null);
  assert.equal(readSglangTokenizeResponse(null), null);
});

test('--backend URL,engine=sglang', () => {
  const b = parseBackendFlag('http://127.0.0.1:30000,engine=sglang,events=tcp://127.0.0.1:5557');
  assert.equal(b.engine, 'sglang');
  assert.equal(b.events, 'tcp://127.0.0.1:5557');
  assert.throws(() => parseBackendFlag('http://h:1,engine=trt'), /engine/);
});
