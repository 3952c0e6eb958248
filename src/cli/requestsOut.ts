/**
 * `--requests-out FILE.jsonl` (`kvroute sim`, `kvroute bench`): one JSON line per request
 * (`src/results/requestRecord.ts`), each run's requests in arrival order. The file is opened
 * before any run starts, so a path that cannot be written fails at once, naming the flag.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { type RequestRecord, requestLine } from '../results/requestRecord.ts';
import { UsageError } from './args.ts';

/** What the file holds (a row's help line). */
export const REQUESTS_OUT_TEXT =
  'one line per request: id, policy, replicas, customer, arrivalMs, replica, promptTokens, ' +
  'cachedTokens, ttftMs, tpotMs, endMs, error';
export const REQUESTS_OUT_HELP =
  '  --requests-out FILE.jsonl  one line per request: id, policy, replicas, customer, arrivalMs,\n' +
  '                        replica, promptTokens, cachedTokens, ttftMs, tpotMs, endMs, error\n';

export class RequestsFile {
  readonly #fd: number;
  #run: RequestRecord[] = [];
  #runIndex = 0;

  constructor(path: string) {
    try {
      this.#fd = openSync(path, 'w');
    } catch (err) {
      const code = (err as { code?: string }).code ?? (err as Error).message;
      throw new UsageError(`--requests-out ${path}: cannot write the file (${code})`);
    }
  }

  /** Keeps a request of run `run`; the first of a later run writes out the one before. */
  add(run: number, r: RequestRecord): void {
    if (run !== this.#runIndex) {
      if (this.#run.length > 0) this.endRun();
      this.#runIndex = run;
    }
    this.#run.push(r);
  }

  /** Writes the current run's requests, in arrival order. */
  endRun(): void {
    const run = this.#run.sort((a, b) => a.id - b.id);
    this.#run = [];
    const CHUNK = 4096;
    for (let i = 0; i < run.length; i += CHUNK) {
      const lines = run.slice(i, i + CHUNK).map(requestLine);
      writeSync(this.#fd, `${lines.join('\n')}\n`);
    }
  }

  close(): void {
    if (this.#run.length > 0) this.endRun();
    closeSync(this.#fd);
  }
}
