/**
 * The discrete-event loop, Vidur's shape: pop the earliest event, set the virtual clock to its
 * time, handle it, push whatever the handler returns. Nothing here reads the wall clock.
 */
import type { EventQueue, SimEvent } from './eventQueue.ts';

/** The virtual clock: the time of the event being handled. */
export interface SimClock {
  nowMs: number;
}

export type Handler<E extends SimEvent> = (event: E) => E | readonly E[] | undefined;

export interface LoopOptions {
  /** Called every `checkEvery` events; returning true stops the loop (early stop, progress). */
  check?: (nowMs: number) => boolean;
  checkEvery?: number;
}

/** Runs until the queue is empty or `check` says stop; returns the number of events handled. */
export function runLoop<E extends SimEvent>(
  queue: EventQueue<E>,
  clock: SimClock,
  handle: Handler<E>,
  opts: LoopOptions = {},
): number {
  const checkEvery = opts.checkEvery ?? 4096;
  let handled = 0;
  for (let event = queue.pop(); event !== undefined; event = queue.pop()) {
    clock.nowMs = event.timeMs;
    const next = handle(event);
    if (next !== undefined) {
      if (Array.isArray(next)) for (const e of next as readonly E[]) queue.push(e);
      else queue.push(next as E);
    }
    if (++handled % checkEvery === 0 && opts.check?.(clock.nowMs)) break;
  }
  return handled;
}
