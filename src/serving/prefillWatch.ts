/**
 * When a non-streamed request's prefill ends. The gateway sees a streamed request's first token
 * pass by, but a non-streamed answer arrives whole, after its decode: until then the ledger would
 * count its prompt as queued prefill, and a replica decoding for one customer looked as loaded as
 * one with that whole prompt still to compute, so the next turn of another customer warm there
 * spilled to a cold replica. The engine's KV events say it sooner: once the prompt's last full
 * block is stored on the replica, its prefill is done (events mode only).
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { Router } from '../router/index.ts';

interface Watched {
  requestId: string;
  lastBlockKey: BlockKey;
}

export class PrefillWatch {
  readonly #router: Router;
  readonly #onPrefillDone: ((requestId: string) => void) | undefined;
  /** Replica name -> non-streamed requests in prefill there. */
  readonly #byReplica = new Map<string, Map<string, Watched>>();

  /** `onPrefillDone`: told of each request whose prefill ended here (after the router). */
  constructor(router: Router, onPrefillDone?: (requestId: string) => void) {
    this.#router = router;
    this.#onPrefillDone = onPrefillDone;
  }

  /** Watches a request routed to `replica` until its last full block is stored there. */
  watch(replica: string, requestId: string, blockKeys: readonly BlockKey[]): void {
    const lastBlockKey = blockKeys[blockKeys.length - 1];
    if (lastBlockKey === undefined || this.#router.indexMode !== 'events') return;
    let watched = this.#byReplica.get(replica);
    if (!watched) {
      watched = new Map();
      this.#byReplica.set(replica, watched);
    }
    watched.set(requestId, { requestId, lastBlockKey });
  }

  unwatch(replica: string, requestId: string): void {
    this.#byReplica.get(replica)?.delete(requestId);
  }

  /** After `replica`'s events were applied: requests whose prompt is stored leave the queue. */
  onEvents(replica: string, nowMs: number): void {
    const watched = this.#byReplica.get(replica);
    if (!watched || watched.size === 0) return;
    for (const w of watched.values()) {
      if (!this.#router.storedOn(replica, w.lastBlockKey)) continue;
      watched.delete(w.requestId);
      if (this.#router.onFirstToken(w.requestId, nowMs)) this.#onPrefillDone?.(w.requestId);
    }
  }
}
