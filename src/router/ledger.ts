/**
 * The router's own ledger of work it has assigned, per replica. A request's queued prompt
 * tokens are its *uncached* prompt tokens on the chosen replica at routing time (promptTokens -
 * cachedTokens there): the prefill work the assignment actually added. They count from
 * assignment until the first token comes back (prefill done), then the request's prompt blocks
 * count as active decode blocks until it finishes, aborts or fails. Engine reports never touch
 * the ledger: it is the term that must not go stale.
 */

export interface LedgerEntry {
  readonly replica: number;
  readonly promptTokens: number;
  readonly uncachedTokens: number;
  readonly promptBlocks: number;
  readonly uncachedBlocks: number;
  /** The request's LoRA adapter, if any. */
  readonly lora?: string;
  /** False until the first token came back. */
  decoding: boolean;
}

/** One replica's totals. */
export interface ReplicaLoad {
  /** Uncached prompt tokens of requests still in prefill. */
  queuedPromptTokens: number;
  prefillRequests: number;
  decodeRequests: number;
  /** Uncached prompt blocks of requests still in prefill. */
  activePrefillBlocks: number;
  /** Prompt blocks (KV held) of requests past their first token. */
  activeDecodeBlocks: number;
  /** Prompt tokens of requests past their first token. */
  activeDecodeTokens: number;
}

export function emptyLoad(): ReplicaLoad {
  return {
    queuedPromptTokens: 0,
    prefillRequests: 0,
    decodeRequests: 0,
    activePrefillBlocks: 0,
    activeDecodeBlocks: 0,
    activeDecodeTokens: 0,
  };
}

export class Ledger {
  #entries = new Map<string, LedgerEntry>();
  #loads: ReplicaLoad[] = [];

  ensureReplicas(count: number): void {
    while (this.#loads.length < count) this.#loads.push(emptyLoad());
  }

  /** Current totals of `replica` (read only; copy before handing out). */
  load(replica: number): Readonly<ReplicaLoad> {
    return this.#loads[replica]!;
  }

  get(requestId: string): Readonly<LedgerEntry> | undefined {
    return this.#entries.get(requestId);
  }

  get size(): number {
    return this.#entries.size;
  }

  assign(requestId: string, entry: Omit<LedgerEntry, 'decoding'>): void {
    this.finish(requestId);
    this.#entries.set(requestId, { ...entry, decoding: false });
    const load = this.#loads[entry.replica]!;
    load.queuedPromptTokens += entry.uncachedTokens;
    load.activePrefillBlocks += entry.uncachedBlocks;
    load.prefillRequests++;
  }

  /** Prefill done: queued tokens leave, the prompt's blocks become decode load. */
  firstToken(requestId: string): LedgerEntry | undefined {
    const entry = this.#entries.get(requestId);
    if (!entry || entry.decoding) return undefined;
    entry.decoding = true;
    const load = this.#loads[entry.replica]!;
    load.queuedPromptTokens -= entry.uncachedTokens;
    load.activePrefillBlocks -= entry.uncachedBlocks;
    load.prefillRequests--;
    load.decodeRequests++;
    load.activeDecodeBlocks += entry.promptBlocks;
    load.activeDecodeTokens += entry.promptTokens;
    return entry;
  }

  /** Finished, aborted or failed: whatever it still held is freed. */
  finish(requestId: string): LedgerEntry | undefined {
    const entry = this.#entries.get(requestId);
    if (!entry) return undefined;
    this.#entries.delete(requestId);
    const load = this.#loads[entry.replica]!;
    if (entry.decoding) {
      load.decodeRequests--;
      load.activeDecodeBlocks -= entry.promptBlocks;
      load.activeDecodeTokens -= entry.promptTokens;
    } else {
      load.queuedPromptTokens -= entry.uncachedTokens;
      load.activePrefillBlocks -= entry.uncachedBlocks;
      load.prefillRequests--;
    }
    return entry;
  }
}
