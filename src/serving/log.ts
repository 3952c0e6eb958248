/**
 * The gateway's structured log: pino, one JSON object per line (ISO time, level name, message,
 * fields such as `reqId` and `replica`), or the same records as short readable lines when the
 * destination is a terminal. Everything the gateway logs is a state change or an error, plus the
 * optional access line per request; nothing on the hot path unless asked for.
 */
import type { Writable } from 'node:stream';
import { pino, type Logger, stdTimeFunctions } from 'pino';
import type { LogLevel } from './configDefaults.ts';

export type { Logger };

export interface LogOptions {
  level: LogLevel;
  /** Where lines go (default stderr: stdout is the CLI's own output). */
  destination?: Writable & { isTTY?: boolean };
  /** Readable text instead of JSON (default: when the destination is a terminal). */
  pretty?: boolean;
}

export function makeLogger(options: LogOptions): Logger {
  const destination = options.destination ?? process.stderr;
  const pretty = options.pretty ?? destination.isTTY === true;
  return pino(
    {
      level: options.level,
      base: { pid: process.pid },
      timestamp: stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pretty ? new TextLines(destination) : destination,
  );
}

/** A logger that drops everything (embedding without a log, most tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * At most one line per `intervalMs` per key for a repeating error (a replica whose KV events do
 * not decode would otherwise log every batch); the next line says how many were held back.
 */
export class RateLimitedLog {
  readonly #lastMs = new Map<string, number>();
  readonly #held = new Map<string, number>();

  constructor(readonly intervalMs: number) {}

  /** Calls `write(heldBack)` when a line is due for `key`; counts the occurrence otherwise. */
  maybe(key: string, nowMs: number, write: (heldBack: number) => void): void {
    const last = this.#lastMs.get(key);
    if (last !== undefined && nowMs - last < this.intervalMs) {
      this.#held.set(key, (this.#held.get(key) ?? 0) + 1);
      return;
    }
    this.#lastMs.set(key, nowMs);
    const heldBack = this.#held.get(key) ?? 0;
    this.#held.delete(key);
    write(heldBack);
  }
}

const COLORS: Record<string, string> = {
  fatal: '\u001b[35m',
  error: '\u001b[31m',
  warn: '\u001b[33m',
  info: '\u001b[32m',
  debug: '\u001b[36m',
  trace: '\u001b[90m',
};
const RESET = '\u001b[0m';
const HIDDEN = new Set(['time', 'level', 'msg', 'pid']);

/** pino's JSON lines as `12:00:01.234 WARN  replica down replica=127.0.0.1:8001 reason=...`. */
class TextLines {
  constructor(readonly out: Writable) {}

  write(line: string): boolean {
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return this.out.write(line);
    }
    const level = String(rec.level ?? 'info');
    const time = typeof rec.time === 'string' ? rec.time.slice(11, 23) : '';
    const fields = Object.entries(rec)
      .filter(([k]) => !HIDDEN.has(k))
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
    const color = COLORS[level] ?? '';
    const head = `${time} ${color}${level.toUpperCase().padEnd(5)}${RESET} ${String(rec.msg ?? '')}`;
    return this.out.write(`${[head, ...fields].join(' ')}\n`);
  }
}
