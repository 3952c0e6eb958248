/**
 * The simulator's future-event list: a binary min-heap keyed by (timeMs, priority, seq).
 * `priority` orders events that fall on the same instant (lower first: a replica's finished
 * step is applied before an arrival at the same time, so the router sees the freshest state);
 * `seq` (insertion order) breaks the remaining ties, so a run never depends on heap internals.
 * Events are plain objects the caller may reuse once popped (each replica reuses its one
 * step-end event), which keeps the hot loop free of allocations.
 */
import { grown } from '../util/grown.ts';

export interface SimEvent {
  timeMs: number;
  priority: number;
  /** Set by `push`; callers leave it alone. */
  seq: number;
}

/** Same-instant order of the fleet's events (lower runs first). */
export const PRIORITY = {
  /** A replica dies or comes back before anything else happens at that instant. */
  fault: 0,
  /** A step's tokens and finished requests are applied before new work is routed. */
  stepEnd: 1,
  /** Delayed KV events and engine reports reach the router next. */
  kvEvents: 2,
  report: 3,
  reportTick: 4,
  /** A new request is routed once the router has seen everything above. */
  arrival: 5,
  /** Samples observe the state after everything else at that instant. */
  sample: 6,
} as const;

/** seq below this: `priority * SEQ_SPAN + seq` is exact in a double (priorities are < 8). */
const SEQ_SPAN = 2 ** 48;

/**
 * The heap keeps each event's key in two typed arrays beside it: its time, and its rank
 * (`priority * SEQ_SPAN + seq`, the same order as priority then seq). A sift compares numbers
 * in two contiguous arrays and never reads the event objects, which a fleet of hundreds of
 * replicas scatters over the heap (each replica's reused step-end event is its own object).
 * The keys are read at `push`: an event changed while queued keeps the place it was pushed at.
 */
export class EventQueue<E extends SimEvent = SimEvent> {
  #events: (E | undefined)[] = [];
  #times = new Float64Array(64);
  #ranks = new Float64Array(64);
  #size = 0;
  #seq = 0;

  get size(): number {
    return this.#size;
  }

  push(event: E): void {
    const seq = this.#seq++;
    if (seq >= SEQ_SPAN) throw new RangeError('EventQueue: more than 2^48 events pushed');
    event.seq = seq;
    if (this.#size === this.#times.length) this.#grow();
    const time = event.timeMs;
    const rank = event.priority * SEQ_SPAN + seq;
    const times = this.#times;
    const ranks = this.#ranks;
    const events = this.#events;
    let i = this.#size++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = times[parent]!;
      if (pt < time || (pt === time && ranks[parent]! < rank)) break;
      times[i] = pt;
      ranks[i] = ranks[parent]!;
      events[i] = events[parent];
      i = parent;
    }
    this.#place(i, time, rank, event);
  }

  peek(): E | undefined {
    return this.#size > 0 ? this.#events[0] : undefined;
  }

  pop(): E | undefined {
    if (this.#size === 0) return undefined;
    const events = this.#events;
    const times = this.#times;
    const ranks = this.#ranks;
    const top = events[0];
    const n = --this.#size;
    const last = events[n];
    const time = times[n]!;
    const rank = ranks[n]!;
    events[n] = undefined;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        let c = l;
        if (r < n) {
          const rt = times[r]!;
          const lt = times[l]!;
          if (rt < lt || (rt === lt && ranks[r]! < ranks[l]!)) c = r;
        }
        const ct = times[c]!;
        if (time < ct || (time === ct && rank < ranks[c]!)) break;
        times[i] = ct;
        ranks[i] = ranks[c]!;
        events[i] = events[c];
        i = c;
      }
      this.#place(i, time, rank, last);
    }
    return top;
  }

  /** Heap slot `i` takes `event`, with its key (time, rank): where a sift ends. */
  #place(i: number, time: number, rank: number, event: E | undefined): void {
    this.#times[i] = time;
    this.#ranks[i] = rank;
    this.#events[i] = event;
  }

  #grow(): void {
    this.#times = grown(this.#times, new Float64Array(this.#times.length * 2));
    this.#ranks = grown(this.#ranks, new Float64Array(this.#ranks.length * 2));
  }
}
