/**
 * Progress while `kvroute calibrate` measures: one updating bar on a TTY, else one line per probe
 * on stderr (so logs of a long run say what it did); nothing with --quiet.
 */
import type { ProgressEvent } from './live.ts';

export class CalibrationProgress {
  readonly #mode: 'bar' | 'lines' | 'off';
  readonly #stream: NodeJS.WriteStream;
  #shown = false;

  constructor(quiet: boolean, stream: NodeJS.WriteStream = process.stderr) {
    this.#mode = quiet ? 'off' : stream.isTTY === true ? 'bar' : 'lines';
    this.#stream = stream;
  }

  update(e: ProgressEvent): void {
    if (this.#mode === 'off') return;
    if (this.#mode === 'lines') {
      if (e.result !== undefined) this.#stream.write(`calibrate: ${e.label}: ${e.result}\n`);
      return;
    }
    const width = 30;
    const filled = Math.round(Math.min(1, e.fraction) * width);
    const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
    const pctDone = (Math.min(1, e.fraction) * 100).toFixed(0).padStart(3);
    this.#stream.write(`\r[${bar}] ${pctDone}% ${e.label}${e.result ? `: ${e.result}` : ''}\x1b[K`);
    this.#shown = true;
  }

  done(): void {
    if (this.#shown) this.#stream.write('\r\x1b[K');
    this.#shown = false;
  }
}
