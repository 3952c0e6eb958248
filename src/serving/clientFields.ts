/**
 * Request fields only the gateway may write. `kv_transfer_params` steers vLLM's KV connector:
 * on a decode engine it names the host, port, engine and blocks to pull from, so a client's
 * would send the engine's `/nixl/pull` and `/nixl/done` wherever the client likes and reach
 * another request's held blocks. The gateway writes its own on the P/D legs (`src/gateway/pd/protocol.ts`);
 * a client's is refused with vLLM's 400, on every path that reads a body.
 */
import { badRequest } from '../openai/errors.ts';

/** Fields a client must not send; the gateway alone writes them upstream. */
export const GATEWAY_ONLY_FIELDS: readonly string[] = ['kv_transfer_params'];

/** Throws a 400 naming the field when a parsed body carries one (null counts as absent). */
export function refuseGatewayOnlyFields(body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  for (const field of GATEWAY_ONLY_FIELDS) {
    const v = (body as Record<string, unknown>)[field];
    if (v !== undefined && v !== null) {
      throw badRequest(`'${field}' is set by the gateway and cannot be sent by a client`, field);
    }
  }
}
