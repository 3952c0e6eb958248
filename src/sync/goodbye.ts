/**
 * A goodbye only its sender can say. Each gateway draws a random secret at start and sends its
 * SHA-256 in every heartbeat; its goodbye reveals the secret. A receiver pins the first
 * commitment it hears under a peer id and honours a goodbye only when the revealed secret hashes
 * to it: whoever reads the subjects sees the hash, never the secret, so naming a peer in a
 * forged goodbye drops nobody. (Forging the peer's other messages needs NATS permissions to
 * stop: docs/nats.md.)
 */
import { createHash, randomBytes } from 'node:crypto';

export interface Goodbye {
  /** Revealed once, in the goodbye. */
  secret: string;
  /** Sent in every heartbeat. */
  commitment: string;
}

export function commitmentOf(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function makeGoodbye(secret = randomBytes(32).toString('hex')): Goodbye {
  return { secret, commitment: commitmentOf(secret) };
}

/** A goodbye is the peer's own when its secret hashes to the commitment pinned for that peer. */
export function isGenuineGoodbye(pinned: string | undefined, secret: string): boolean {
  return pinned !== undefined && commitmentOf(secret) === pinned;
}
