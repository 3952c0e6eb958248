/**
 * What a peer may make a gateway hold, and the ranges of the numbers it may claim. NATS core
 * says nothing about who sent a message (without per-client permissions, docs/nats.md), so
 * every message is read as untrusted: its fields in range, its size, its sender's entries and
 * the number of peers all bounded. Pure: the sync asks, these answer.
 */

export interface SyncLimits {
  /** Peers held at once; a message from one more is refused until one leaves. */
  maxPeers: number;
  /** Entries one peer may hold in one model pool's ledger; more are refused. */
  maxEntriesPerPeer: number;
  /** A message larger than this is dropped unread (NATS's own default max_payload is 1 MiB). */
  maxMessageBytes: number;
}

export const DEFAULT_SYNC_LIMITS: SyncLimits = {
  maxPeers: 64,
  maxEntriesPerPeer: 8_192,
  maxMessageBytes: 1_048_576,
};

/** The defaults, overridden by what is given. */
export function limitsOf(given: Partial<SyncLimits> | undefined): SyncLimits {
  return { ...DEFAULT_SYNC_LIMITS, ...given };
}

/** Longest request id, replica name or adapter name a record may carry. */
export const MAX_NAME_CHARS = 256;
/** Most prompt tokens one entry may claim (4 Mi: past any served context length). */
export const MAX_PROMPT_TOKENS = 4_194_304;
/** Largest KV block a record may name, in tokens. */
export const MAX_BLOCK_SIZE = 4_096;

/** A peer id: one NATS subject token (its snapshot subject ends with it), 1 to 64 chars. */
export function isPeerId(v: unknown): v is string {
  return typeof v === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(v);
}

/** A name a record carries: a non-empty string of bounded length. */
export function isBoundedName(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_NAME_CHARS;
}

/** A token count a record may claim: a whole number in [0, MAX_PROMPT_TOKENS]. */
export function isTokenCount(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) <= MAX_PROMPT_TOKENS;
}

export function isBlockSize(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 1 && (v as number) <= MAX_BLOCK_SIZE;
}

/** Whether a message from `peer` may be taken: a known peer, or a new one while there is room. */
export function admitsPeer(known: boolean, peerCount: number, limits: SyncLimits): boolean {
  return known || peerCount < limits.maxPeers;
}

/** How many more entries a peer holding `held` may add (0 at the bound). */
export function entryRoom(held: number, limits: SyncLimits): number {
  return Math.max(0, limits.maxEntriesPerPeer - held);
}
