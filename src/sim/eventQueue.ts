/**
 * The simulator's future-event list: a binary min-heap keyed by (timeMs, priority, seq).
 * `priority` orders events that fall on the same instant (lower first: a replica's finished
 * step is applied before an arrival at the same time, so the router sees the freshest state);
 * `seq` (insertion order) breaks the remaining ties, so a run never depends on heap internals.
 * Events are plain objects the caller may reuse once popped (each replica reuses its one
 * step-end event), which keeps the hot loop free of allocations.
 */
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

function before(a: SimEvent, b: SimEvent): boolean {
  if (a.timeMs !== b.timeMs) return a.timeMs < b.timeMs;
  if (a.priority !== b.priority) return a.priority < b.priority;
  return a.seq < b.seq;
}

export class EventQueue<E extends SimEvent = SimEvent> {
  readonly #heap: E[] = [];
  #seq = 0;

  get size(): number {
    return this.#heap.length;
  }

  push(event: E): void {
    event.seq = this.#seq++;
    const heap = this.#heap;
    let i = heap.length;
    heap.push(event);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent]!;
      if (!before(event, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = event;
  }

  peek(): E | undefined {
    return this.#heap[0];
  }

  pop(): E | undefined {
    const heap = this.#heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    const last = heap.pop()!;
    const n = heap.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const c = r < n && before(heap[r]!, heap[l]!) ? r : l;
        if (!before(heap[c]!, last)) break;
        heap[i] = heap[c]!;
        i = c;
      }
      heap[i] = last;
    }
    return top;
  }
}
