/**
 * `kvroute engine`'s P/D trust flags (docs/security.md): the fleet's shared secret, from
 * KVROUTE_KV_TRANSFER_SECRET or --kv-transfer-secret-file (else the first --api-key, which the
 * server picks), and the bounds on blocks held for remote decodes.
 */
import { readFileSync } from 'node:fs';
import { SECRET_ENV } from '../engine/connector/secret.ts';
import type { EngineServerOptions } from '../engine/server/options.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { bool, int, options, str } from './options/table.ts';

const SECURITY_DOCS = ' ([security.md](security.md))';

/** The trust flags, one row each (`options/table.ts`). */
// biome-ignore format: one option a line
export const TRANSFER_SECURITY_OPTIONS = options({
  'kv-transfer-secret-file': str('FILE', `the P/D fleet's shared secret (first line of FILE; or ${SECRET_ENV}; default: the first --api-key): side-channel calls need it, and params this engine emits carry a MAC made with it; none at all: the side channel is closed (calls 403, nothing held for a remote decode, nothing pulled)`, { docs: SECURITY_DOCS }),
  'kv-transfer-insecure': bool('with no secret, open the side channel to anyone and take params unverified, as vLLM does (a trusted network only)', { docs: SECURITY_DOCS }),
  'kv-max-held-blocks': int('N', 'blocks held for remote decodes at most (default: half the KV pool); past it a prefill is answered with kv_transfer_params null', { min: 0 }),
  'kv-max-held-blocks-per-client': int('N', 'the same per client, its API key or else its address (default: half of --kv-max-held-blocks)', { min: 0 }),
});

/** The trust flags' names (each needs --kv-transfer-config). */
export const TRANSFER_SECURITY_FLAG_NAMES = Object.keys(TRANSFER_SECURITY_OPTIONS);

/** The flags the NixlConnector takes beyond the link; `given`: whether the connector is on. */
export function readTransferSecurityFlags(
  flags: Flags,
  env: NodeJS.ProcessEnv,
): Partial<EngineServerOptions> {
  const option = readerOf(TRANSFER_SECURITY_OPTIONS, flags);
  const file = option('kv-transfer-secret-file');
  const fromEnv = env[SECRET_ENV];
  let secret: string | undefined;
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(
        `--kv-transfer-secret-file: cannot read ${file}: ${(err as Error).message}`,
      );
    }
    secret = text.split(/\r?\n/, 1)[0]!.trim();
    if (secret === '') throw new UsageError(`--kv-transfer-secret-file: ${file} is empty`);
  } else if (fromEnv !== undefined && fromEnv !== '') secret = fromEnv;
  const held = option('kv-max-held-blocks');
  const perClient = option('kv-max-held-blocks-per-client');
  const insecure = option('kv-transfer-insecure') === true;
  return {
    ...(insecure && { kvTransferInsecure: true }),
    ...(secret !== undefined && { kvTransferSecret: secret }),
    ...(held !== undefined && { kvMaxHeldBlocks: held }),
    ...(perClient !== undefined && { kvMaxHeldBlocksPerClient: perClient }),
  };
}

/**
 * The start-up line of an engine with no transfer secret, or null: its side channel closed (P/D
 * transfers off), or, with --kv-transfer-insecure, open to anyone.
 */
export function openSideChannelWarning(o: EngineServerOptions): string | null {
  if (o.kvTransferConfig?.kvConnector !== 'NixlConnector') return null;
  if (o.kvTransferSecret !== undefined || (o.apiKeys ?? []).some((k) => k !== '')) return null;
  if (o.kvTransferInsecure !== true) {
    return `kvroute engine: no transfer secret: the P/D side channel (/nixl/pull, /nixl/done) is closed, a prefill holds no blocks and a decode pulls none: set ${SECRET_ENV}, --kv-transfer-secret-file or --api-key (or --kv-transfer-insecure on a trusted network)\n`;
  }
  return `kvroute engine: --kv-transfer-insecure: the P/D side channel (/nixl/pull, /nixl/done) is open and kv_transfer_params are not verified: every client must be trusted\n`;
}
