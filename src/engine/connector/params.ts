/**
 * `kv_transfer_params` as vLLM's NixlConnector reads and writes them (field names from
 * `vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py` and the proxy in
 * `tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`):
 *
 * - a prefill request carries `{do_remote_decode: true, do_remote_prefill: false,
 *   remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null}`;
 * - its response carries what `request_finished` returns: `{do_remote_prefill: true,
 *   do_remote_decode: false, remote_block_ids, remote_engine_id, remote_request_id, remote_host,
 *   remote_port, tp_size}`;
 * - the decode request carries those back. Without `remote_block_ids` or one of
 *   `remote_engine_id, remote_request_id, remote_host, remote_port`, vLLM logs "Got invalid
 *   KVTransferParams" and computes the prompt itself: so does this (`incomplete`).
 *
 * A field of the wrong type is the request's 400, naming the field.
 *
 * kvroute adds one field of its own when the engines share a secret (secret.ts): `kvroute_mac`,
 * the prefiller's HMAC over the fields a pull uses. vLLM reads named fields and ignores it.
 */
import { badRequest } from '../../openai/errors.ts';

export type KvTransferRequest =
  /** Prefill here and keep the blocks for a remote decode. */
  | { kind: 'prefill' }
  /** The prompt was prefilled remotely: pull its blocks, then decode. */
  | {
      kind: 'decode';
      remoteBlockIds: number[];
      remoteEngineId: string;
      remoteRequestId: string;
      remoteHost: string;
      remotePort: number;
      tpSize: number;
      /** `kvroute_mac`, null when absent. */
      mac: string | null;
    }
  /** do_remote_prefill without what the pull needs: computed locally, as vLLM falls back. */
  | { kind: 'incomplete'; missing: string }
  /** Neither flag set: an ordinary request. */
  | { kind: 'none' };

/** What a NixlConnector prefiller answers (`request_finished`'s dict, in its order). */
export interface KvTransferResponse {
  do_remote_prefill: true;
  do_remote_decode: false;
  remote_block_ids: number[];
  remote_engine_id: string;
  remote_request_id: string;
  remote_host: string;
  remote_port: number;
  tp_size: number;
  kvroute_mac?: string;
}

export const MAC_FIELD = 'kvroute_mac';

const PARAM = 'kv_transfer_params';

/** Reads `body.kv_transfer_params`; absent or null is `none`. Throws a 400 naming the field. */
export function readKvTransferParams(body: Record<string, unknown>): KvTransferRequest {
  const raw = body[PARAM];
  if (raw === undefined || raw === null) return { kind: 'none' };
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    throw badRequest(`'${PARAM}' must be an object`, PARAM);
  }
  const p = raw as Record<string, unknown>;
  const flag = (name: string): boolean => {
    const v = p[name];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw bad(name, 'a boolean');
    return v;
  };
  const remoteDecode = flag('do_remote_decode');
  const remotePrefill = flag('do_remote_prefill');
  if (remoteDecode && remotePrefill) {
    throw badRequest(
      `'${PARAM}.do_remote_prefill' and '${PARAM}.do_remote_decode' cannot both be true`,
      `${PARAM}.do_remote_prefill`,
    );
  }
  const blockIds = optional(
    p,
    'remote_block_ids',
    (v) =>
      Array.isArray(v) && v.every((b) => Number.isInteger(b) && b >= 0) ? (v as number[]) : null,
    'a list of block ids (integers >= 0)',
  );
  const engineId = optional(p, 'remote_engine_id', str, 'a string');
  const requestId = optional(p, 'remote_request_id', str, 'a string');
  const host = optional(p, 'remote_host', str, 'a string');
  const port = optional(
    p,
    'remote_port',
    (v) =>
      Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65_535 ? (v as number) : null,
    'an integer port in [1, 65535]',
  );
  const tpSize = optional(
    p,
    'tp_size',
    (v) => (Number.isInteger(v) && (v as number) >= 1 ? (v as number) : null),
    'an integer >= 1',
  );
  const mac = optional(p, MAC_FIELD, str, 'a string');
  if (remoteDecode) return { kind: 'prefill' };
  if (!remotePrefill) return { kind: 'none' };
  if (blockIds === null || blockIds.length === 0)
    return { kind: 'incomplete', missing: 'remote_block_ids' };
  const missing = (
    [
      ['remote_engine_id', engineId],
      ['remote_request_id', requestId],
      ['remote_host', host],
      ['remote_port', port],
    ] as const
  ).find(([, v]) => v === null);
  if (missing) return { kind: 'incomplete', missing: missing[0] };
  return {
    kind: 'decode',
    remoteBlockIds: blockIds,
    remoteEngineId: engineId!,
    remoteRequestId: requestId!,
    remoteHost: host!,
    remotePort: port!,
    tpSize: tpSize ?? 1,
    mac,
  };
}

/** The prefiller's answer for one finished prefill (vLLM's `request_finished`). */
export function prefillResponseParams(o: {
  blockIds: readonly number[];
  engineId: string;
  requestId: string;
  host: string;
  port: number;
  tpSize: number;
  /** The MAC over these fields (secret.ts), when the engines share a secret. */
  mac?: string;
}): KvTransferResponse {
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: [...o.blockIds],
    remote_engine_id: o.engineId,
    remote_request_id: o.requestId,
    remote_host: o.host,
    remote_port: o.port,
    tp_size: o.tpSize,
    ...(o.mac !== undefined && { [MAC_FIELD]: o.mac }),
  };
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function bad(name: string, what: string) {
  return badRequest(`'${PARAM}.${name}' must be ${what}`, `${PARAM}.${name}`);
}

/** A field that may be absent or null (the proxy's prefill request sends nulls). */
function optional<T>(
  p: Record<string, unknown>,
  name: string,
  read: (v: unknown) => T | null,
  what: string,
): T | null {
  const v = p[name];
  if (v === undefined || v === null) return null;
  const out = read(v);
  if (out === null) throw bad(name, what);
  return out;
}
