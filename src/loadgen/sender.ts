/**
 * The open-loop sender: each request goes out at its workload arrival time (divided by the
 * speedup), whether or not earlier ones have answered, so a slow server meets the same offered
 * load as a fast one and its queueing shows up in the latencies. `concurrency` caps requests in
 * flight; one that has to wait for a slot still has its latency measured from its scheduled
 * time. Prompt text for the next request is built while waiting for its send time.
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
  /** Stops sending and cancels what is in flight (Ctrl-C). */
  signal: AbortSignal;
  onSent?: (req: PromptRequest) => void;
  onDone: (req: PromptRequest, scheduledAt: number, outcome: StreamOutcome) => void;
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
    stats.sendLagMs.push(performance.now() - scheduledAt);
    const url = o.urls && o.urls.length > 0 ? o.urls[stats.sent % o.urls.length]! : o.url;
    stats.sent++;
    o.onSent?.(req);
    const task = streamCompletion({
      url,
      prompt: req.text,
      maxTokens: req.arrival.outputTokens,
      // A request for a LoRA adapter names it as its model (the lora workload).
      model: req.arrival.lora ?? o.model,
      apiKey: o.apiKey,
      dispatcher: o.dispatcher,
      signal: o.signal,
    }).then((outcome) => {
      inFlight.delete(task);
      slots.shift()?.();
      o.onDone(req, scheduledAt, outcome);
    });
    inFlight.add(task);
  }
  for (const wake of slots.splice(0)) wake();
  await Promise.all(inFlight);
  return stats;
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
