/**
 * One request's state inside the scheduler. Token accounting follows vLLM: `computedTokens` have
 * KV; the request knows `promptTokens + generatedTokens` tokens; whenever all known tokens have
 * KV the step samples a new one. A (re)admitted request prefills up to `prefillEndTokens` (the
 * prompt, or after a preemption the prompt plus what it had generated), then decodes one token
 * per step.
 */
import type { BlockKey, KeyScope } from '../kv/blockKey.ts';
import type { SchedRequest } from './types.ts';

export type SeqStatus = 'waiting' | 'running' | 'finished' | 'aborted';

export class Seq {
  readonly id: string;
  readonly promptTokens: number;
  readonly maxNewTokens: number;
  readonly priority: number;
  readonly arrivalMs: number;
  /** Queue order: arrival pushed back by priority levels (see priorityAgeMs). */
  readonly queueKeyMs: number;
  /** Order of `add` calls, the tie-break. */
  readonly addSeq: number;
  readonly tokenIds: ArrayLike<number> | null;
  readonly blockKeys: readonly BlockKey[] | null;
  readonly scope: KeyScope;
  /** The LoRA adapter the request runs with, null for the base model. */
  readonly loraName: string | null;
  /** The caller's number for the request (`SchedRequest.handle`), -1 if none. */
  readonly handle: number;

  status: SeqStatus = 'waiting';
  computedTokens = 0;
  prefillEndTokens = 0;
  generatedTokens = 0;
  cachedTokens = 0;
  /**
   * Tokens already computed when each of its prefill chunks after the first started, summed:
   * SGLang's scheduler counts them as cached tokens of that prefill batch (SeqFinished).
   */
  resumedPrefixTokens = 0;
  /** Blocks holding this request's KV, in token order. */
  blockIds: number[] = [];
  /**
   * blockIds.length, kept on the request by every change of its blocks (takeBlocks, tryGrow,
   * the release): a step's check for room reads the request alone, not its block array, which
   * in a simulated fleet has left the cache since the engine's last step.
   */
  blockCount = 0;
  /** Prompt blocks already offered to the prefix cache. */
  storedBlocks = 0;
  /** Its finished prompt waits for the next plan before entering the cache (deferPrefixInsert). */
  storePending = false;
  /** blockKeys.length (0 without keys), for the same reason. */
  keyBlocks = 0;
  /** Order of the (last) admission. */
  admitSeq = -1;
  preemptions = 0;
  /** Where this request sits in the plan being built, valid while plannedStep is current. */
  plannedStep = -1;
  planIndex = -1;

  constructor(req: SchedRequest, addSeq: number, priorityAgeMs: number) {
    this.id = req.id;
    this.promptTokens = req.promptTokens;
    this.maxNewTokens = req.maxNewTokens;
    this.priority = req.priority ?? 0;
    this.arrivalMs = req.arrivalMs ?? 0;
    this.queueKeyMs = this.arrivalMs + this.priority * priorityAgeMs;
    this.addSeq = addSeq;
    this.tokenIds = req.tokenIds ?? null;
    this.blockKeys = req.blockKeys ?? null;
    this.keyBlocks = req.blockKeys?.length ?? 0;
    this.scope = { cacheSalt: req.cacheSalt, loraName: req.loraName };
    this.loraName = req.loraName || null;
    this.handle = req.handle ?? -1;
  }

  /** Tokens known: the prompt and every token sampled so far. */
  get knownTokens(): number {
    return this.promptTokens + this.generatedTokens;
  }

  get isPrefilling(): boolean {
    return this.computedTokens < this.prefillEndTokens;
  }
}
