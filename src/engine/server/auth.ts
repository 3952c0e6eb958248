/**
 * vLLM's `--api-key` (and `VLLM_API_KEY`): its AuthenticationMiddleware
 * (vllm/entrypoints/openai/server_utils.py), installed when `args.api_key or [VLLM_API_KEY]`
 * holds a non-empty key. A request whose path starts with `/v1` must carry
 * `Authorization: Bearer KEY` (scheme in any case, the rest compared whole) for one of the keys,
 * else 401 with vLLM's own body `{"error": "Unauthorized"}`; OPTIONS and every other path
 * (`/health`, `/metrics`, `/tokenize`, `/detokenize`) stay open, as in vLLM. Keys are compared
 * as SHA-256 digests in constant time, as vLLM does.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** vLLM's 401 body, byte for byte (Starlette's JSONResponse writes compact JSON). */
export const UNAUTHORIZED_BODY = '{"error":"Unauthorized"}';

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export class ApiKeyCheck {
  readonly #digests: Buffer[];

  /** The keys that are not empty; none: no check at all (vLLM adds no middleware then). */
  constructor(keys: readonly string[]) {
    this.#digests = keys.filter((k) => k !== '').map(digest);
  }

  get enabled(): boolean {
    return this.#digests.length > 0;
  }

  /** Whether the request may go on; a refused one has been answered with the 401. */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.enabled || req.method === 'OPTIONS') return true;
    const path = (req.url ?? '/').split('?')[0]!;
    if (!path.startsWith('/v1') || this.#verify(req.headers.authorization)) return true;
    res.writeHead(401, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(UNAUTHORIZED_BODY),
    });
    res.end(UNAUTHORIZED_BODY);
    return false;
  }

  #verify(header: string | undefined): boolean {
    if (!header) return false;
    const space = header.indexOf(' ');
    const scheme = space < 0 ? header : header.slice(0, space);
    if (scheme.toLowerCase() !== 'bearer') return false;
    const param = digest(space < 0 ? '' : header.slice(space + 1));
    let match = false;
    for (const d of this.#digests) match = timingSafeEqual(param, d) || match;
    return match;
  }
}

/** vLLM's rule: the `--api-key` values when any is given, else `VLLM_API_KEY`. */
export function apiKeysOf(flagKeys: readonly string[], envKey: string | undefined): string[] {
  const keys = flagKeys.length > 0 ? flagKeys : [envKey ?? ''];
  return keys.filter((k) => k !== '');
}
