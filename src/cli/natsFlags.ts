/**
 * The NATS credential and TLS flags, one reader for every command that connects to NATS
 * (`serve`, `epp`, `engine --nats`). Secrets come from files (a Kubernetes secret mounted as a
 * volume) or the environment, never only from argv, where `ps` shows them: a password or token
 * from `--nats-password-file` / `--nats-token-file` or `KVROUTE_NATS_PASSWORD` /
 * `KVROUTE_NATS_TOKEN`.
 */
import { readFileSync } from 'node:fs';
import type { NatsAuth } from '../sync/natsAuth.ts';
import { type Flags, UsageError } from './args.ts';
import { helpOf } from './options/help.ts';
import { flagNamesOf } from './options/spec.ts';
import { options, str } from './options/table.ts';

/** The credential and TLS flags, as rows of an option table (`options/table.ts`). */
// biome-ignore format: one option a line
export const NATS_AUTH_OPTIONS = options({
  'nats-user': str('NAME', "NATS user; its password from --nats-password-file FILE or the environment's KVROUTE_NATS_PASSWORD"),
  'nats-password-file': str('FILE', "the NATS user's password (a mounted secret)"),
  'nats-token-file': str('FILE', 'a NATS token (or KVROUTE_NATS_TOKEN)'),
  'nats-nkey-file': str('FILE', 'a NATS nkey seed (SU...)'),
  'nats-creds-file': str('FILE', 'a NATS creds file (JWT and seed, as nsc writes it)'),
  'nats-tls-ca': str('FILE', 'TLS to NATS, the server checked against this CA'),
  'nats-tls-cert': str('FILE', 'a client certificate (mutual TLS), with --nats-tls-key'),
  'nats-tls-key': str('FILE', "the client certificate's key, with --nats-tls-cert"),
});

/** The flags, as one string for `flagSpec` (commands not yet on an option table). */
export const NATS_AUTH_FLAG_NAMES = flagNamesOf(NATS_AUTH_OPTIONS);
export const NATS_AUTH_HELP = helpOf(NATS_AUTH_OPTIONS);

type Env = Record<string, string | undefined>;

function secretFile(flags: Flags, name: string): string | undefined {
  const path = flags.string(name);
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--${name}: cannot read '${path}': ${(err as Error).message}`);
  }
  const secret = text.replace(/\r?\n$/, '');
  if (secret === '') throw new UsageError(`--${name}: '${path}' is empty`);
  return secret;
}

function readableFile(flags: Flags, name: string): string | undefined {
  const path = flags.string(name);
  if (path === undefined) return undefined;
  try {
    readFileSync(path);
  } catch (err) {
    throw new UsageError(`--${name}: cannot read '${path}': ${(err as Error).message}`);
  }
  return path;
}

/**
 * The credential and TLS flags (and the environment's secrets). Null when none is given.
 * One way of authenticating at most (user/password, token, nkey or creds); TLS goes with any.
 */
export function readNatsAuth(flags: Flags, env: Env = process.env): NatsAuth | null {
  const user = flags.string('nats-user');
  const password = secretFile(flags, 'nats-password-file') ?? nonEmpty(env.KVROUTE_NATS_PASSWORD);
  const token = secretFile(flags, 'nats-token-file') ?? nonEmpty(env.KVROUTE_NATS_TOKEN);
  const nkeyFile = readableFile(flags, 'nats-nkey-file');
  const credsFile = readableFile(flags, 'nats-creds-file');
  const tlsCa = readableFile(flags, 'nats-tls-ca');
  const tlsCert = readableFile(flags, 'nats-tls-cert');
  const tlsKey = readableFile(flags, 'nats-tls-key');
  if (password !== undefined && user === undefined) {
    throw new UsageError('a NATS password (--nats-password-file) needs --nats-user NAME');
  }
  if (user !== undefined && password === undefined) {
    throw new UsageError(
      '--nats-user needs its password: --nats-password-file FILE or KVROUTE_NATS_PASSWORD',
    );
  }
  const ways = [user !== undefined, token !== undefined, nkeyFile, credsFile].filter(Boolean);
  if (ways.length > 1) {
    throw new UsageError(
      'NATS: one of --nats-user, --nats-token-file, --nats-nkey-file, --nats-creds-file',
    );
  }
  if ((tlsCert === undefined) !== (tlsKey === undefined)) {
    throw new UsageError('--nats-tls-cert and --nats-tls-key go together');
  }
  const auth: NatsAuth = {
    ...(user !== undefined && { user }),
    ...(password !== undefined && { password }),
    ...(token !== undefined && { token }),
    ...(nkeyFile !== undefined && { nkeyFile }),
    ...(credsFile !== undefined && { credsFile }),
    ...(tlsCa !== undefined && { tlsCa }),
    ...(tlsCert !== undefined && { tlsCert }),
    ...(tlsKey !== undefined && { tlsKey }),
  };
  return Object.keys(auth).length === 0 ? null : auth;
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}
