/**
 * The driver's side of one request: where its scheduling, tokens, finish and failure are told.
 */
import type { RequestFinished } from '../types.ts';

/** Where one request's output goes. */
export interface RequestSink {
  /**
   * The scheduler admitted the request (again, after a preemption) in a step that began at
   * `atMs` (the driver's clock), with `cachedTokens` of its prompt served from the prefix cache.
   */
  onScheduled?(atMs: number, cachedTokens: number): void;
  /** Output token `index` is out; `tokenId` is the sampled id when the runtime samples. */
  onToken(index: number, tokenId?: number): void;
  onFinish(finished: RequestFinished): void;
  /** The engine failed (a bug in the core): the request will never finish. */
  onFail(err: Error): void;
}
