/** The one updating progress line on stderr while a bench runs (TTY only). */
import { percentile } from '../results/stats.ts';
import type { Collector } from './collect.ts';

export class ProgressLine {
  readonly #collector: Collector;
  readonly #label: string;
  readonly #startAt = performance.now();
  #timer: NodeJS.Timeout | null = null;

  constructor(collector: Collector, label: string) {
    this.#collector = collector;
    this.#label = label;
  }

  start(intervalMs = 500): void {
    if (process.stderr.isTTY !== true) return;
    this.#timer = setInterval(() => this.#draw(), intervalMs);
    this.#timer.unref();
  }

  #draw(): void {
    const c = this.#collector;
    const recent = Float64Array.from(c.samples.slice(-200), (s) => s.ttftMs).sort();
    const p50 = percentile(recent, 0.5);
    const elapsedS = (performance.now() - this.#startAt) / 1000;
    process.stderr.write(
      `\r${this.#label} ${elapsedS.toFixed(0)}s sent ${c.arrived} in flight ${c.inFlight} ` +
        `done ${c.completed} errors ${c.errors} TTFT p50 ${Number.isFinite(p50) ? p50.toFixed(0) : '-'} ms\x1b[K`,
    );
  }

  stop(): void {
    if (this.#timer === null) return;
    clearInterval(this.#timer);
    this.#timer = null;
    process.stderr.write('\r\x1b[K');
  }
}
