/**
 * The open-loop sender: each request goes out at its workload arrival time (divided by the
 * speedup), whether or not earlier ones have answered, so a slow server meets the same offered
 * load as a fast one and its queueing shows up in the latencies. `concurrency` caps requests in
 * flight; one that has to wait for a slot still has its latency measured from its scheduled
 * time. Prompt text for the next request is built while waiting for its send time.
 * `timeoutMs` gives a request up that long after its send, as a harness's client timeout
 * does: it is aborted on the wire (the server sees a disconnect and drops its work) and its
 * outcome is the error kind `timeout`, counted with the others.
 */
import type { Dispatcher } from 'undici';
import type { PromptRequest } from './prompts.ts';
import { type StreamOutcome, streamCompletion } from './sse.ts';

export interface SenderOptions {
  url: string;
  /** Several endpoints (gateways of one stack): requests go to each in turn, round robin. */
  urls?: readonly string[];
  model: string | null;
  apiKey: string | null;
  dispatcher: Dispatcher;
  /** Workload time runs this many times faster than the wall clock. */
  speedup: number;
  /** Requests in flight at most (Infinity: open loop without a cap). */
  concurrency: number;
  /** Times each request from its send instead of its scheduled time (`onDone`'s `timedFrom`). */
  timeFromSend?: boolean;
  /** Wall ms after its send at which a request is given up (absent: never). */
  timeoutMs?: number;
  /** Stops sending and cancels what is in flight (Ctrl-C). */
  signal: AbortSignal;
  onSent?: (req: PromptRequest) => void;
  /** `timedFrom`: the send with `timeFromSend`, else `scheduledAt`. */
  onDone: (
    req: PromptRequest,
    scheduledAt: number,
    outcome: StreamOutcome,
    timedFrom: number,
  ) => void;
}

export interface SenderStats {
  /** performance.now() of workload time 0. */
  startAt: number;
  sent: number;
  /** How late each request left after its scheduled time, wall ms (the client's own lag). */
  sendLagMs: number[];
}

/** Time to build the first prompt before its send time. */
const LEAD_MS = 20;

export async function sendOpenLoop(
  requests: Iterable<PromptRequest>,
  o: SenderOptions,
): Promise<SenderStats> {
  const stats: SenderStats = { startAt: performance.now() + LEAD_MS, sent: 0, sendLagMs: [] };
  const inFlight = new Set<Promise<void>>();
  const slots: (() => void)[] = [];
  for (const req of requests) {
    if (o.signal.aborted) break;
    const scheduledAt = stats.startAt + req.arrival.atMs / o.speedup;
    await sleepUntil(scheduledAt, o.signal);
    while (inFlight.size >= o.concurrency && !o.signal.aborted) {
      await new Promise<void>((resolve) => slots.push(resolve));
    }
    if (o.signal.aborted) break;
    const sentAt = performance.now();
    stats.sendLagMs.push(sentAt - scheduledAt);
    const timedFrom = o.timeFromSend ? sentAt : scheduledAt;
    const url = o.urls && o.urls.length > 0 ? o.urls[stats.sent % o.urls.length]! : o.url;
    stats.sent++;
    o.onSent?.(req);
    const deadline = requestDeadline(o.signal, o.timeoutMs);
    const task = streamCompletion({
      url,
      prompt: req.text,
      maxTokens: req.arrival.outputTokens,
      // A request for a LoRA adapter names it as its model (the lora workload).
      model: req.arrival.lora ?? o.model,
      apiKey: o.apiKey,
      dispatcher: o.dispatcher,
      signal: deadline.signal,
    }).then((outcome) => {
      deadline.clear();
      if (deadline.expired && outcome.error !== null && !o.signal.aborted) {
        outcome.error = 'timeout';
        outcome.detail = `given up ${o.timeoutMs} ms after its send (client timeout)`;
      }
      inFlight.delete(task);
      slots.shift()?.();
      o.onDone(req, scheduledAt, outcome, timedFrom);
    });
    inFlight.add(task);
  }
  for (const wake of slots.splice(0)) wake();
  await Promise.all(inFlight);
  return stats;
}

/**
 * A request's own signal: the run's, and without a timeout nothing more; with one, a signal that
 * also fires `timeoutMs` after the send (`expired` then says so). `clear` stops the timer.
 */
function requestDeadline(
  run: AbortSignal,
  timeoutMs: number | undefined,
): { signal: AbortSignal; readonly expired: boolean; clear(): void } {
  if (timeoutMs === undefined || !Number.isFinite(timeoutMs)) {
    return { signal: run, expired: false, clear: () => undefined };
  }
  const own = new AbortController();
  const state = { expired: false };
  const onRunAbort = () => own.abort();
  run.addEventListener('abort', onRunAbort, { once: true });
  const timer = setTimeout(() => {
    state.expired = true;
    own.abort();
  }, timeoutMs);
  return {
    signal: own.signal,
    get expired() {
      return state.expired;
    },
    clear() {
      clearTimeout(timer);
      run.removeEventListener('abort', onRunAbort);
    },
  };
}

function sleepUntil(at: number, signal: AbortSignal): Promise<void> {
  const waitMs = at - performance.now();
  if (waitMs <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, waitMs);
    signal.addEventListener('abort', done, { once: true });
  });
}
