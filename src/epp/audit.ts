/**
 * The endpoint picker's part of the cache audit: it follows each response (ext_proc sends the
 * picker the response's headers and body), reads the cached-token count off it as the gateway
 * does (`UsageTap`, watching only: the picker does not rewrite a stream, so it does not ask
 * upstream for usage a client did not ask for) and hands it to the pool's audit when the
 * response ends whole with a status under 400. A response without the count (a stream without
 * usage, vLLM without --enable-prompt-tokens-details) is judged by the replica's hit counter.
 * A stream's time from the pick to its first token goes with it, for the speed test of a
 * claimed hit (`../serving/audit/observe.ts`).
 */
import { auditResponse } from '../serving/audit/observe.ts';
import { UsageTap } from '../serving/audit/usageTap.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import type { Picked } from './picker.ts';

export class ResponseAudit {
  readonly #picked: Picked;
  readonly #tap: UsageTap;
  readonly #hitsAtRoute: number | undefined;
  #status = 0;
  /** From the pick's answer to the stream's first token, ms (the audit's speed test). */
  #ttftMs: number | null = null;

  constructor(picked: Picked) {
    this.#picked = picked;
    this.#tap = new UsageTap({ stream: picked.stream, strip: false });
    this.#hitsAtRoute = picked.pool.audit.hitsNow(picked.replica);
  }

  headers(status: number, contentType: string): void {
    this.#status = status;
    this.#tap.start(status, contentType);
  }

  /** The stream's first token came, `ttftMs` after the picker named the endpoint. */
  firstToken(ttftMs: number): void {
    if (this.#picked.stream) this.#ttftMs ??= ttftMs;
  }

  /** The `usage.completion_tokens` the response reported so far (null: none seen). */
  get completionTokens(): number | null {
    return this.#tap.completionTokens;
  }

  body(chunk: Buffer): void {
    this.#tap.data(chunk);
  }

  /** The response ended whole: judge it. */
  end(metrics: GatewayMetrics): void {
    this.#tap.end();
    if (this.#status === 0 || this.#status >= 400 || !this.#picked.auditable) return;
    const p = this.#picked;
    auditResponse(
      p.pool,
      metrics,
      p.route.decision,
      p.promptTokens,
      this.#tap.cachedTokens,
      this.#hitsAtRoute,
      this.#ttftMs,
    );
  }
}
