/**
 * Secrets for a `nats-server` of the tests, made at test time in a temporary folder:
 * - TLS: a self-signed CA and a server certificate for 127.0.0.1 it signs, plus a client
 *   certificate for mutual TLS, by `openssl`;
 * - an nkey user (its seed file and public key);
 * - decentralised auth: an operator, an account and a user, their JWTs signed with their nkeys
 *   as nats-server checks them (`{"typ":"JWT","alg":"ed25519-nkey"}`, claims with `nats.type`
 *   and `version: 2`), and the user's creds file as `nsc` writes it.
 * The nkeys come from `@nats-io/nkeys`, which the NATS client depends on; where it cannot be
 * loaded, `loadNkeys` gives null and the tests that need it skip.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function opensslInstalled(): boolean {
  return spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
}

export interface TlsFiles {
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, signed by the CA. */
export function makeTlsFiles(dir: string): TlsFiles {
  const days = ['-days', '2'];
  openssl(dir, [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    ...days,
    '-subj',
    '/CN=kvroute test CA',
  ]);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, cn] of [
    ['server', '127.0.0.1'],
    ['client', 'kvroute-gateway'],
  ] as const) {
    openssl(dir, [
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=${cn}`,
    ]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      ...days,
      '-extfile',
      `${name}.ext`,
    ]);
  }
  return {
    ca: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
  };
}

export interface KeyPair {
  getPublicKey(): string;
  getSeed(): Uint8Array;
  sign(data: Uint8Array): Uint8Array;
}

export interface Nkeys {
  createOperator(): KeyPair;
  createAccount(): KeyPair;
  createUser(): KeyPair;
}

/** `@nats-io/nkeys`, or null where it is not installed. */
export async function loadNkeys(): Promise<Nkeys | null> {
  try {
    return (await import('@nats-io/nkeys')) as unknown as Nkeys;
  } catch {
    return null;
  }
}

const b64url = (b: Buffer | Uint8Array): string => Buffer.from(b).toString('base64url');

/** RFC 4648 base32 without padding, as the JWT library writes a claim's `jti`. */
function base32(bytes: Buffer): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

/** A NATS JWT: `nats` claims about `subject`, signed by `issuer`. */
function natsJwt(issuer: KeyPair, subject: string, name: string, nats: object): string {
  const header = b64url(Buffer.from(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' })));
  const claims: Record<string, unknown> = {
    jti: '',
    iat: Math.floor(Date.now() / 1000),
    iss: issuer.getPublicKey(),
    name,
    sub: subject,
    nats,
  };
  claims.jti = base32(createHash('sha256').update(JSON.stringify(claims)).digest());
  const body = `${header}.${b64url(Buffer.from(JSON.stringify(claims)))}`;
  return `${body}.${b64url(issuer.sign(Buffer.from(body)))}`;
}

const UNLIMITED = { subs: -1, data: -1, payload: -1 };

export interface OperatorFiles {
  /** nats-server's configuration lines for operator mode (memory resolver, the account preloaded). */
  serverConfig: string;
  /** The user's creds file. */
  creds: string;
}

/** An operator, its account and a user of it; the user's creds file written under `dir`. */
export function makeOperator(nkeys: Nkeys, dir: string): OperatorFiles {
  const operator = nkeys.createOperator();
  const account = nkeys.createAccount();
  const user = nkeys.createUser();
  const operatorJwt = natsJwt(operator, operator.getPublicKey(), 'kvroute-test', {
    type: 'operator',
    version: 2,
  });
  const accountJwt = natsJwt(operator, account.getPublicKey(), 'kvroute', {
    type: 'account',
    version: 2,
    limits: {
      ...UNLIMITED,
      imports: -1,
      exports: -1,
      wildcards: true,
      conn: -1,
      leaf: -1,
    },
  });
  const userJwt = natsJwt(account, user.getPublicKey(), 'kvroute-gateway', {
    type: 'user',
    version: 2,
    pub: {},
    sub: {},
    ...UNLIMITED,
  });
  const creds = join(dir, 'user.creds');
  writeFileSync(
    creds,
    `-----BEGIN NATS USER JWT-----\n${userJwt}\n------END NATS USER JWT------\n\n` +
      '************************* IMPORTANT *************************\n' +
      'NKEY Seed printed below can be used to sign and prove identity.\n\n' +
      `-----BEGIN USER NKEY SEED-----\n${Buffer.from(user.getSeed()).toString('utf8')}\n------END USER NKEY SEED------\n`,
    { mode: 0o600 },
  );
  const serverConfig = [
    `operator: "${operatorJwt}"`,
    'resolver: MEMORY',
    `resolver_preload: { ${account.getPublicKey()}: "${accountJwt}" }`,
  ].join('\n');
  return { serverConfig, creds };
}
