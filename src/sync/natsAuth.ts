/**
 * NATS credentials and TLS as the client takes them: user and password, token, nkey seed,
 * creds file (JWT and seed), TLS with a CA and optionally a client certificate. The flags are
 * read by `src/cli/natsFlags.ts`, shared by every command that connects. The nkey seed and the
 * creds file are read again at each (re)connect, so a rotated secret is taken without a restart.
 */
import { readFileSync } from 'node:fs';
import {
  type Authenticator,
  type ConnectionOptions,
  credsAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
} from '@nats-io/transport-node';

/** What a client presents to NATS. Every field optional; an empty object: anonymous, no TLS. */
export interface NatsAuth {
  user?: string;
  /** The user's password (from a file or the environment). */
  password?: string;
  /** A token (from a file or the environment). */
  token?: string;
  /** A file holding an nkey seed (`SU...`). */
  nkeyFile?: string;
  /** A decentralised-auth creds file (JWT and seed, as `nsc` writes it). */
  credsFile?: string;
  /** TLS: the CA that signed the server's certificate (turns TLS on). */
  tlsCa?: string;
  /** TLS client certificate and key (mutual TLS); both or neither. */
  tlsCert?: string;
  tlsKey?: string;
}

/** The client's options for `auth`: an authenticator and TLS, nothing when `auth` is absent. */
export function natsConnectOptions(auth: NatsAuth | null | undefined): Partial<ConnectionOptions> {
  if (!auth) return {};
  const authenticator = authenticatorOf(auth);
  const tls =
    auth.tlsCa !== undefined || auth.tlsCert !== undefined
      ? {
          tls: {
            ...(auth.tlsCa !== undefined && { caFile: auth.tlsCa }),
            ...(auth.tlsCert !== undefined && { certFile: auth.tlsCert }),
            ...(auth.tlsKey !== undefined && { keyFile: auth.tlsKey }),
          },
        }
      : {};
  return { ...(authenticator !== null && { authenticator }), ...tls };
}

function authenticatorOf(auth: NatsAuth): Authenticator | null {
  if (auth.user !== undefined) return usernamePasswordAuthenticator(auth.user, auth.password);
  if (auth.token !== undefined) return tokenAuthenticator(auth.token);
  const nkeyFile = auth.nkeyFile;
  if (nkeyFile !== undefined) {
    return nkeyAuthenticator(() => new TextEncoder().encode(readFileSync(nkeyFile, 'utf8').trim()));
  }
  const credsFile = auth.credsFile;
  if (credsFile !== undefined) {
    return credsAuthenticator(() => new Uint8Array(readFileSync(credsFile)));
  }
  return null;
}
