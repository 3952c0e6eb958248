/**
 * What to do about a replica's audit verdict, as a small state machine counted in requests (no
 * clock):
 *
 *   events --over-predicts--> replay --the replay mended it--> events (after a clean window)
 *                               |--the replay removed nothing / none possible--> approx
 *   approx --after retryAfter ok requests--> replay (events tried again; retryAfter doubles)
 *   any stage --under-predicts--> diagnose (tokenizer agreement, event stream), stage kept
 *
 * A replay mends an index that over-predicts only by removing blocks: one that leaves the
 * replica with as many indexed blocks as before shows the engine never published the removals,
 * so its events are not trusted until they are tried again and agree (a window without a verdict).
 */
import type { AuditChange } from '../../router/audit/index.ts';

export type RepairStage = 'events' | 'replay' | 'approx';
export type RepairAction = 'replay' | 'approx' | 'retry-events' | 'diagnose' | 'recovered';

/** Ok requests in the approximate fallback before events are tried again (doubles each time). */
export const DEFAULT_RETRY_EVENTS_AFTER = 128;

export class RepairPlan {
  stage: RepairStage = 'events';
  retryAfter: number;
  #okRequests = 0;
  readonly #window: number;

  constructor(windowRequests: number, retryAfter = DEFAULT_RETRY_EVENTS_AFTER) {
    this.#window = windowRequests;
    this.retryAfter = retryAfter;
  }

  /** One judged request; the action it calls for, or null. */
  next(change: AuditChange): RepairAction | null {
    if (change.changed && change.verdict === 'over-predicts') {
      this.#okRequests = 0;
      if (this.stage === 'events') {
        this.stage = 'replay';
        return 'replay';
      }
      this.stage = 'approx';
      return 'approx';
    }
    if (change.changed && change.verdict === 'under-predicts') return 'diagnose';
    if (change.verdict !== 'ok') return null;
    this.#okRequests++;
    if (this.stage === 'replay' && this.#okRequests >= this.#window) {
      this.stage = 'events';
      this.#okRequests = 0;
      return 'recovered';
    }
    if (this.stage === 'approx' && this.#okRequests >= this.retryAfter) {
      this.stage = 'replay';
      this.#okRequests = 0;
      this.retryAfter *= 2;
      return 'retry-events';
    }
    return null;
  }

  /** The replay could not mend it (no replay socket, or it removed nothing): fall back now. */
  replayFailed(): void {
    this.stage = 'approx';
    this.#okRequests = 0;
  }
}
