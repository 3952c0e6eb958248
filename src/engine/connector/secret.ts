/**
 * The secret the engines of one P/D fleet share: it authenticates side-channel calls (a Bearer
 * header, as `--api-key` does on /v1) and binds the `kv_transfer_params` a prefiller emits to it
 * (an HMAC-SHA256 over the fields a pull uses, sent as `kvroute_mac`). A decode engine pulls only
 * what a holder of the secret emitted, so a client cannot point it at another host or at another
 * request's blocks. Its source: `KVROUTE_KV_TRANSFER_SECRET` or `--kv-transfer-secret-file`, else
 * the engine's first `--api-key`; none: the side channel is closed, unless
 * `--kv-transfer-insecure` opens it (a trusted network only).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export const SECRET_ENV = 'KVROUTE_KV_TRANSFER_SECRET';

/** The fields of a prefiller's params that a pull relies on, in the MAC's order. */
export interface BoundParams {
  engineId: string;
  requestId: string;
  host: string;
  port: number;
  blockIds: readonly number[];
  tpSize: number;
}

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export class TransferSecret {
  readonly #secret: string;
  readonly #digest: Buffer;
  /** A key of its own for the MAC, so a MAC never doubles as a bearer token. */
  readonly #macKey: Buffer;

  constructor(secret: string) {
    if (secret === '') throw new RangeError('the kv transfer secret must not be empty');
    this.#secret = secret;
    this.#digest = digest(secret);
    this.#macKey = createHmac('sha256', secret).update('kvroute kv_transfer_params v1').digest();
  }

  /** The header a puller sends. */
  get authorization(): string {
    return `Bearer ${this.#secret}`;
  }

  /** Whether an Authorization header carries the secret (compared in constant time). */
  admits(header: string | undefined): boolean {
    if (!header) return false;
    const space = header.indexOf(' ');
    if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') return false;
    return timingSafeEqual(digest(header.slice(space + 1)), this.#digest);
  }

  mac(p: BoundParams): string {
    // A JSON array: one string per field list, no separator to confuse.
    const text = JSON.stringify([p.engineId, p.requestId, p.host, p.port, p.blockIds, p.tpSize]);
    return createHmac('sha256', this.#macKey).update(text, 'utf8').digest('hex');
  }

  verifies(p: BoundParams, mac: string | null): boolean {
    if (mac === null) return false;
    const want = Buffer.from(this.mac(p), 'hex');
    const got = Buffer.from(mac, 'hex');
    return got.length === want.length && timingSafeEqual(got, want);
  }
}

/**
 * The fleet's secret: the one given (env or file), else the first API key; null (open) when
 * neither exists.
 */
export function transferSecretOf(
  given: string | undefined,
  apiKeys: readonly string[],
): TransferSecret | null {
  const secret = given !== undefined && given !== '' ? given : apiKeys.find((k) => k !== '');
  return secret === undefined ? null : new TransferSecret(secret);
}
