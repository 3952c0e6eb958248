/**
 * The router's own ledger of work it has assigned, per replica. A request's queued prompt
 * tokens are its *uncached* prompt tokens on the chosen replica at routing time (promptTokens -
 * cachedTokens there): the prefill work the assignment actually added. They count from
 * assignment until the first token comes back (prefill done), then the request's prompt blocks
 * count as active decode blocks until it finishes, aborts or fails. Engine reports never touch
 * the ledger: it is the term that must not go stale. Peer routers (other gateways sharing state)
 * add their assignments under their own id, so request ids of different routers never collide,
 * and they count towards the same totals.
 */
import { grown } from '../util/grown.ts';

export interface LedgerEntry {
  readonly replica: number;
  readonly promptTokens: number;
  readonly uncachedTokens: number;
  readonly promptBlocks: number;
  readonly uncachedBlocks: number;
  /** Tokens per block the blocks were counted with. */
  readonly blockSize: number;
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
  /** Peers' entries: peer id -> request id -> entry (a namespace of its own per peer). */
  #peers = new Map<string, Map<string, LedgerEntry>>();
  #loads: ReplicaLoad[] = [];
  /**
   * Per replica, its load's queuedPromptTokens, kept beside it in one array (the same sums in
   * the same order, so the same values): a route that scores the whole fleet reads this, not a
   * load object per replica (see ReplicaGauges for why).
   */
  #queued = new Float64Array(0);

  ensureReplicas(count: number): void {
    while (this.#loads.length < count) this.#loads.push(emptyLoad());
    if (this.#queued.length < count) this.#queued = grown(this.#queued, new Float64Array(count));
  }

  /** queuedPromptTokens of every replica, by id (read only; valid until replicas are added). */
  get queuedPromptTokens(): Readonly<Float64Array> {
    return this.#queued;
  }

  /** Current totals of `replica` (read only; copy before handing out). */
  load(replica: number): Readonly<ReplicaLoad> {
    return this.#loads[replica]!;
  }

  get(requestId: string): Readonly<LedgerEntry> | undefined {
    return this.#entries.get(requestId);
  }

  /** This router's own entries in flight. */
  get size(): number {
    return this.#entries.size;
  }

  /** Peers' entries in flight, all peers together. */
  get peerSize(): number {
    let n = 0;
    for (const entries of this.#peers.values()) n += entries.size;
    return n;
  }

  assign(requestId: string, entry: Omit<LedgerEntry, 'decoding'>): void {
    this.finish(requestId);
    const added = newEntry(entry);
    this.#entries.set(requestId, added);
    this.#add(added);
  }

  /** Prefill done: queued tokens leave, the prompt's blocks become decode load. */
  firstToken(requestId: string): LedgerEntry | undefined {
    return this.#toDecode(this.#entries.get(requestId));
  }

  /** Finished, aborted or failed: whatever it still held is freed. */
  finish(requestId: string): LedgerEntry | undefined {
    const entry = this.#entries.get(requestId);
    if (!entry) return undefined;
    this.#entries.delete(requestId);
    this.#remove(entry);
    return entry;
  }

  /** A peer router's assignment, counted like an own one; an id it already had is replaced. */
  assignPeer(
    peer: string,
    requestId: string,
    entry: Omit<LedgerEntry, 'decoding'>,
    decoding = false,
  ): void {
    this.finishPeer(peer, requestId);
    let entries = this.#peers.get(peer);
    if (!entries) {
      entries = new Map();
      this.#peers.set(peer, entries);
    }
    const added = newEntry(entry);
    entries.set(requestId, added);
    this.#add(added);
    if (decoding) this.#toDecode(added);
  }

  firstTokenPeer(peer: string, requestId: string): LedgerEntry | undefined {
    return this.#toDecode(this.#peers.get(peer)?.get(requestId));
  }

  finishPeer(peer: string, requestId: string): LedgerEntry | undefined {
    const entries = this.#peers.get(peer);
    const entry = entries?.get(requestId);
    if (!entries || !entry) return undefined;
    entries.delete(requestId);
    if (entries.size === 0) this.#peers.delete(peer);
    this.#remove(entry);
    return entry;
  }

  /** Frees every entry of `peer`; returns them (request id and entry). */
  dropPeer(peer: string): [string, LedgerEntry][] {
    const entries = this.#peers.get(peer);
    if (!entries) return [];
    this.#peers.delete(peer);
    for (const entry of entries.values()) this.#remove(entry);
    return [...entries];
  }

  /** How many entries `peer` holds here. */
  peerEntries(peer: string): number {
    return this.#peers.get(peer)?.size ?? 0;
  }

  /** Peers with entries in flight. */
  peers(): string[] {
    return [...this.#peers.keys()];
  }

  /** Own entries (peer null) and peers' entries, for a snapshot. */
  *entries(): IterableIterator<[peer: string | null, requestId: string, entry: LedgerEntry]> {
    for (const [id, entry] of this.#entries) yield [null, id, entry];
    for (const [peer, entries] of this.#peers) {
      for (const [id, entry] of entries) yield [peer, id, entry];
    }
  }

  #add(entry: LedgerEntry): void {
    const load = this.#loads[entry.replica]!;
    load.queuedPromptTokens += entry.uncachedTokens;
    this.#queued[entry.replica] = load.queuedPromptTokens;
    load.activePrefillBlocks += entry.uncachedBlocks;
    load.prefillRequests++;
  }

  #toDecode(entry: LedgerEntry | undefined): LedgerEntry | undefined {
    if (!entry || entry.decoding) return undefined;
    entry.decoding = true;
    const load = this.#loads[entry.replica]!;
    load.queuedPromptTokens -= entry.uncachedTokens;
    this.#queued[entry.replica] = load.queuedPromptTokens;
    load.activePrefillBlocks -= entry.uncachedBlocks;
    load.prefillRequests--;
    load.decodeRequests++;
    load.activeDecodeBlocks += entry.promptBlocks;
    load.activeDecodeTokens += entry.promptTokens;
    return entry;
  }

  #remove(entry: LedgerEntry): void {
    const load = this.#loads[entry.replica]!;
    if (entry.decoding) {
      load.decodeRequests--;
      load.activeDecodeBlocks -= entry.promptBlocks;
      load.activeDecodeTokens -= entry.promptTokens;
    } else {
      load.queuedPromptTokens -= entry.uncachedTokens;
      this.#queued[entry.replica] = load.queuedPromptTokens;
      load.activePrefillBlocks -= entry.uncachedBlocks;
      load.prefillRequests--;
    }
  }
}

/**
 * A fresh entry, still in prefill, with the fields named one by one: an object spread here
 * (`{ ...entry, decoding: false }`) cost about 2 µs per route on Node 20 and made every later
 * read and write of the entry slow, where a literal costs a fraction of that. Every entry has
 * the same fields (`lora` undefined without an adapter), so all share one shape.
 */
function newEntry(entry: Omit<LedgerEntry, 'decoding'>): LedgerEntry {
  return {
    replica: entry.replica,
    promptTokens: entry.promptTokens,
    uncachedTokens: entry.uncachedTokens,
    promptBlocks: entry.promptBlocks,
    uncachedBlocks: entry.uncachedBlocks,
    blockSize: entry.blockSize,
    lora: entry.lora,
    decoding: false,
  };
}
