/**
 * vLLM's P/D proxy protocol, as `tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`
 * runs it: the prefill leg is the client's request with
 * `kv_transfer_params = {do_remote_decode: true, do_remote_prefill: false, remote_engine_id:
 * null, remote_block_ids: null, remote_host: null, remote_port: null}`, `stream: false`,
 * `max_tokens: 1` (and `max_completion_tokens: 1` when present), without `stream_options`,
 * `min_tokens` and `min_completion_tokens`; the decode leg is the client's request with the
 * prefill answer's `kv_transfer_params`, or with none when the answer has none. A client's own
 * never gets this far (`../../serving/clientFields.ts`); the legs are still built without it.
 */

export type JsonObject = Record<string, unknown>;

export function prefillLegBody(request: JsonObject): JsonObject {
  const body: JsonObject = { ...request };
  body.kv_transfer_params = {
    do_remote_decode: true,
    do_remote_prefill: false,
    remote_engine_id: null,
    remote_block_ids: null,
    remote_host: null,
    remote_port: null,
  };
  body.stream = false;
  body.max_tokens = 1;
  if ('max_completion_tokens' in body) body.max_completion_tokens = 1;
  delete body.stream_options;
  delete body.min_tokens;
  delete body.min_completion_tokens;
  return body;
}

/** The prefill answer's params, or null when it has none (the decode leg then computes). */
export function transferParamsOf(prefillAnswer: unknown): JsonObject | null {
  if (prefillAnswer === null || typeof prefillAnswer !== 'object') return null;
  const p = (prefillAnswer as JsonObject).kv_transfer_params;
  if (p === null || typeof p !== 'object' || Array.isArray(p)) return null;
  return Object.keys(p).length > 0 ? (p as JsonObject) : null;
}

export function decodeLegBody(request: JsonObject, params: JsonObject | null): JsonObject {
  const { kv_transfer_params: _client, ...body } = request;
  return params === null ? body : { ...body, kv_transfer_params: params };
}
