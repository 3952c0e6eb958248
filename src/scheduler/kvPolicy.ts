/**
 * How the scheduler gets KV memory: one interface, one policy per file, one registry line each.
 * A policy decides how many blocks a request needs and when; the pool does the allocating.
 */
import type { PrefixMatch } from '../kv/blockPool.ts';

import type { Seq } from './seq.ts';
import type { KvPolicyName } from './types.ts';

export interface KvPolicy {
  readonly name: KvPolicyName;
  /** Whether a running request can find the pool dry (and so someone must be preempted). */
  readonly preempts: boolean;
  /** Why a request this large can never run on this pool, or null when it can. */
  neverFitsReason(promptTokens: number, maxNewTokens: number): string | null;
  /**
   * Secures KV to admit `seq`, whose cached prefix `hit` it pins, with a first chunk of
   * `chunkTokens`. False: no room now, and nothing changed.
   */
  tryAdmit(seq: Seq, hit: PrefixMatch, chunkTokens: number): boolean;
  /**
   * Secures KV for `tokens` more tokens of a running `seq`. False: pool dry, nothing changed.
   * Not asked while the blocks `seq` holds have room for them.
   */
  tryGrow(seq: Seq, tokens: number): boolean;
}

export interface KvPolicyOptions {
  /** Paged: fraction of blocks that admission keeps free. */
  watermark: number;
}
