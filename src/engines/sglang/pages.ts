/**
 * SGLang's radix-cache pages re-cut into the router's blocks (pure state, no I/O; one per replica).
 *
 * SGLang caches pages of `--page-size` tokens (1 by default) and names each by a SHA-256 chain
 * over its tokens (mem_cache/utils.py `get_hash_str`, published as `hash_str_to_int64`), which
 * no router hash can match. The router keys its index on whole blocks of `--block-size` tokens,
 * chained with its own hash, and maps engine hashes to those keys (router/index/foreignKeys.ts). So
 * this cuts each stored chain of pages into router blocks and hands on one ForeignKvEvent block
 * per router block, named by the page that completes it: the page's own hash when the block ends
 * with the page (always so when the page size divides the block size), `"<hash>/<n>"` when it
 * ends n tokens into a longer page. The router then keys the block on its tokens, as for vLLM.
 *
 * A page remembers its parent, its tokens, and the router blocks it is part of, so that:
 * - a store that continues a chain mid-block (a child radix node) finds the tokens of the
 *   unfinished block by walking back from its parent page;
 * - removing a page (SGLang evicts leaves first, one BlockRemoved per radix node) removes every
 *   router block it was part of: a block is cached only while all of its pages are.
 * Only the device pool is indexed ("GPU", or no medium from older SGLang); the HiCache tiers
 * ("CPU_PINNED", "DISK", "EXTERNAL") are counted and skipped.
 */
import type { EngineHash, ForeignBlockStored, ForeignKvEvent } from '../../router/index.ts';
import type { SglangEvent } from './events.ts';

interface Page {
  parent: bigint | null;
  tokens: number[];
  /** Tokens from the chain's root to this page's end. */
  end: number;
  /** The last router block complete at or before `end` (null: none yet). */
  lastBlock: EngineHash | null;
  /** Router blocks this page is part of (stored ones). */
  blocks: EngineHash[];
}

export interface PageChainStats {
  /** Pages held now. */
  pages: number;
  /** Stored pages dropped because their parent page was unknown (a missed event). */
  unresolvedPages: number;
  /** Events for a medium other than the device pool (HiCache tiers), skipped. */
  tierEvents: number;
}

export class SglangPageChain {
  readonly #blockSize: number;
  readonly #pages = new Map<bigint, Page>();
  #unresolved = 0;
  #tierEvents = 0;

  constructor(blockSize: number) {
    if (!(Number.isSafeInteger(blockSize) && blockSize >= 1)) {
      throw new RangeError(`block size ${blockSize} (an integer >= 1)`);
    }
    this.#blockSize = blockSize;
  }

  stats(): PageChainStats {
    return {
      pages: this.#pages.size,
      unresolvedPages: this.#unresolved,
      tierEvents: this.#tierEvents,
    };
  }

  /** The engine restarted or the router forgot the replica: nothing is cached. */
  reset(): void {
    this.#pages.clear();
  }

  /** SGLang events in, the router's foreign events (in router blocks) out. */
  translate(events: readonly SglangEvent[]): ForeignKvEvent[] {
    const out: ForeignKvEvent[] = [];
    for (const event of events) {
      if (event.type === 'AllBlocksCleared') {
        this.#pages.clear();
        out.push(event);
      } else if (event.medium !== null && event.medium !== 'GPU') this.#tierEvents++;
      else if (event.type === 'BlockStored') this.#stored(event, out);
      else this.#removed(event.pageHashes, out);
    }
    return out;
  }

  #removed(pageHashes: readonly bigint[], out: ForeignKvEvent[]): void {
    const gone: EngineHash[] = [];
    for (const hash of pageHashes) {
      const page = this.#pages.get(hash);
      if (!page) continue;
      this.#pages.delete(hash);
      for (const id of page.blocks) if (!gone.includes(id)) gone.push(id);
    }
    if (gone.length > 0) out.push({ type: 'BlockRemoved', blockHashes: gone });
  }

  #stored(event: Extract<SglangEvent, { type: 'BlockStored' }>, out: ForeignKvEvent[]): void {
    const size = this.#blockSize;
    const start = this.#resume(event.parentPageHash);
    if (start === null) {
      this.#unresolved += event.pageHashes.length;
      return;
    }
    let { end, lastBlock } = start;
    let tail = start.tail;
    let tailPages = start.tailPages;
    let prev = event.parentPageHash;
    const ids: EngineHash[] = [];
    const tokens: number[] = [];
    const firstParent = lastBlock;
    const p = event.pageSize;
    for (let i = 0; i < event.pageHashes.length; i++) {
      const hash = event.pageHashes[i]!;
      const pageTokens = event.tokenIds.slice(i * p, (i + 1) * p);
      // A hash stored again without its removal: its old blocks go with the old page.
      const old = this.#pages.get(hash);
      if (old && old.blocks.length > 0) out.push({ type: 'BlockRemoved', blockHashes: old.blocks });
      const page: Page = { parent: prev, tokens: pageTokens, end: end + p, lastBlock, blocks: [] };
      this.#pages.set(hash, page);
      tailPages.push(hash);
      for (let j = 0; j < p; j++) {
        tail.push(pageTokens[j]!);
        if (tail.length < size) continue;
        const id: EngineHash = j === p - 1 ? hash : `${hash}/${j + 1}`;
        for (const h of tailPages) {
          const member = this.#pages.get(h);
          if (member && !member.blocks.includes(id)) member.blocks.push(id);
        }
        ids.push(id);
        for (const t of tail) tokens.push(t);
        lastBlock = id;
        tail = [];
        tailPages = j === p - 1 ? [] : [hash];
      }
      page.lastBlock = lastBlock;
      end += p;
      prev = hash;
    }
    if (ids.length === 0) return;
    const stored: ForeignBlockStored = {
      type: 'BlockStored',
      blockHashes: ids,
      parentBlockHash: firstParent,
      tokenIds: tokens,
      blockSize: size,
      loraName: null,
      cacheSalt: event.cacheSalt,
    };
    out.push(stored);
  }

  /**
   * Where a chain continues after `parent`: its length, its last whole router block, and the
   * tokens (and pages) of the unfinished block after it. Null: the parent page is unknown, or
   * a page of the unfinished block is.
   */
  #resume(parent: bigint | null): {
    end: number;
    lastBlock: EngineHash | null;
    tail: number[];
    tailPages: bigint[];
  } | null {
    if (parent === null) return { end: 0, lastBlock: null, tail: [], tailPages: [] };
    const page = this.#pages.get(parent);
    if (!page) return null;
    const need = page.end % this.#blockSize;
    const chunks: number[][] = [];
    const tailPages: bigint[] = [];
    let have = 0;
    let hash: bigint | null = parent;
    while (have < need) {
      const at: Page | undefined = hash === null ? undefined : this.#pages.get(hash);
      if (!at || hash === null) return null;
      const take = Math.min(at.tokens.length, need - have);
      chunks.push(at.tokens.slice(at.tokens.length - take));
      tailPages.push(hash);
      have += take;
      hash = at.parent;
    }
    chunks.reverse();
    tailPages.reverse();
    return { end: page.end, lastBlock: page.lastBlock, tail: chunks.flat(), tailPages };
  }
}
