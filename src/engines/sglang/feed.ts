/**
 * One SGLang replica's KV event payloads, as the gateway's subscriber applies them: decoded
 * (events.ts), then re-cut from SGLang's pages into the router's blocks (pages.ts). Stateful
 * per replica (the page chain), reset when the engine restarts or the router forgets it.
 */
import type { ForeignKvEvent } from '../../router/index.ts';
import { decodeSglangBatch } from './events.ts';
import { type PageChainStats, SglangPageChain } from './pages.ts';

/** A payload decoded into router events (the subscriber's `BatchDecoder`). */
export interface DecodedForeignBatch {
  events: ForeignKvEvent[];
  malformedEvents: number;
  malformedReason: string | null;
}

export class SglangEventFeed {
  readonly #chain: SglangPageChain;

  constructor(blockSize: number) {
    this.#chain = new SglangPageChain(blockSize);
  }

  /** Throws SglangWireError on a payload that is no batch (the subscriber counts it). */
  decode(payload: Uint8Array): DecodedForeignBatch {
    const batch = decodeSglangBatch(payload);
    return {
      events: this.#chain.translate(batch.events),
      malformedEvents: batch.malformedEvents,
      malformedReason: batch.malformedReason,
    };
  }

  reset(): void {
    this.#chain.reset();
  }

  stats(): PageChainStats {
    return this.#chain.stats();
  }
}
