/**
 * The gateway's half of vLLM's P/D proxy protocol and its pure pieces. The expected legs are
 * written from vLLM's tests/v1/kv_connector/nixl_integration/toy_proxy_server.py
 * (send_request_to_service, _handle_completions), not from kvroute's builders; the decider's
 * cases from llm-d's prefix_based_pd_decider.go.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseBackendFlag, applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { decidePd, DEFAULT_PD_THRESHOLD_TOKENS } from '../../src/gateway/pd/decider.ts';
import { type DecodeCandidate, pickDecode } from '../../src/model/decodePick.ts';
import { decodeLegBody, prefillLegBody, transferParamsOf } from '../../src/gateway/pd/protocol.ts';
import { makeReplicaSpec } from '../../src/model/spec.ts';

test("the prefill leg is the toy proxy's", () => {
  const client = {
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 50,
    max_completion_tokens: 50,
    min_tokens: 3,
    min_completion_tokens: 2,
    temperature: 0,
  };
  // req_data.copy(); kv_transfer_params = {...}; stream False; max_tokens 1;
  // max_completion_tokens 1 if present; del stream_options; pop min_tokens, min_completion_tokens.
  assert.deepEqual(prefillLegBody(client), {
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    stream: false,
    max_tokens: 1,
    max_completion_tokens: 1,
    temperature: 0,
    kv_transfer_params: {
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    },
  });
  assert.equal('max_completion_tokens' in prefillLegBody({ model: 'm', prompt: 'x' }), false);
  // The client's request is left as it was (the decode leg is built from it).
  assert.equal(client.stream, true);
  assert.equal(client.min_tokens, 3);
});

test("the decode leg is the client's request with the prefill answer's params", () => {
  const answer = {
    id: 'cmpl-1',
    choices: [{ text: 'a' }],
    kv_transfer_params: {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [1, 2, 3],
      remote_engine_id: 'e',
      remote_request_id: 'r',
      remote_host: '127.0.0.1',
      remote_port: 8100,
      tp_size: 1,
    },
  };
  const params = transferParamsOf(answer);
  assert.deepEqual(params, answer.kv_transfer_params);
  const client = { model: 'm', prompt: 'x', max_tokens: 9, stream: true, min_tokens: 2 };
  assert.deepEqual(decodeLegBody(client, params), {
    ...client,
    kv_transfer_params: answer.kv_transfer_params,
  });
  // `if kv_transfer_params:` — an empty or missing one leaves the request as sent.
  assert.equal(transferParamsOf({ kv_transfer_params: {} }), null);
  assert.equal(transferParamsOf({ kv_transfer_params: null }), null);
  assert.deepEqual(decodeLegBody(client, null), client);
});

test('the decider follows llm-d: threshold 0 always disaggregates; else a short uncached part is local', () => {
  assert.equal(DEFAULT_PD_THRESHOLD_TOKENS, 0);
  assert.equal(decidePd(10, 0, 0), 'disaggregated');
  assert.equal(decidePd(100, 0, 128), 'local'); // input shorter than nonCachedTokens
  assert.equal(decidePd(1000, 900, 128), 'local'); // non-cached suffix 100 < 128
  assert.equal(decidePd(1000, 872, 128), 'disaggregated'); // 128 is not below 128
  assert.equal(decidePd(1000, 0, 128), 'disaggregated');
});

test('the decode pick: fewest KV bytes and sequences by the TPOT model, KV-full ones last', () => {
  const spec = makeReplicaSpec();
  const c = (name: string, o: Partial<DecodeCandidate> = {}): DecodeCandidate => ({
    name,
    running: 0,
    kvUsage: 0,
    inFlight: 0,
    decodeRequests: 0,
    queuedPromptTokens: 0,
    ...o,
  });
  assert.equal(
    pickDecode(
      [c('a', { running: 30, kvUsage: 0.5 }), c('b', { running: 10, kvUsage: 0.2 })],
      spec,
      1000,
      0.95,
      2048,
    ),
    1,
  );
  assert.equal(
    pickDecode(
      [c('a', { kvUsage: 0.97 }), c('b', { kvUsage: 0.9, running: 60 })],
      spec,
      1000,
      0.95,
      2048,
    ),
    1,
  );
  // Mixed steps: queued prefill on an aggregated replica slows its every decode.
  assert.equal(
    pickDecode(
      [c('a', { queuedPromptTokens: 8000 }), c('b', { running: 4 })],
      spec,
      1000,
      0.95,
      2048,
    ),
    1,
  );
  // Ties go to fewer in flight.
  assert.equal(
    pickDecode([c('a', { inFlight: 2 }), c('b', { inFlight: 1 })], spec, 10, 0.95, 2048),
    1,
  );
  assert.equal(pickDecode([], spec, 10, 0.95, 2048), -1);
});

test('role: --backend ...,role= and the config key, named on error', () => {
  assert.equal(parseBackendFlag('http://127.0.0.1:8100,role=prefill').role, 'prefill');
  assert.equal(parseBackendFlag('http://127.0.0.1:8100').role, undefined);
  assert.throws(
    () => parseBackendFlag('http://127.0.0.1:8100,role=p'),
    /--backend role.*prefill, decode, both/,
  );
  const cfg = applyConfigDoc(
    { backends: [{ url: 'http://127.0.0.1:1', role: 'decode' }], 'pd-threshold': 64 },
    defaultConfig(),
  );
  assert.equal(cfg.pdThreshold, 64);
  assert.throws(
    () => applyConfigDoc({ backends: [{ url: 'http://127.0.0.1:1', role: 'x' }] }, defaultConfig()),
    /backends\[0\]\.role/,
  );
});
