/**
 * Progress of every long command (`kvroute sim` runs and `--search`, `bench`, `calibrate`,
 * `npm run demo`, `npm run bench:capacity`), in one place. On a TTY stderr: one updating bar,
 * shown once the command has run a second. Off a TTY (a log, a CI job, a pipe): one line to
 * stderr every ~10 s saying what is done, what runs, and an estimate of what is left. `--quiet`
 * silences both.
 *
 * Work is reported as tasks with fractions, from any source: a simulation's virtual clock, a
 * bench client's finished requests, a worker thread's messages. A phase groups tasks ("runs",
 * "search delay-cost") and may say how many it expects; tasks may overlap (parallel workers),
 * each with its own fraction.
 *
 * `KVROUTE_PROGRESS_MS` sets the off-TTY line period in ms (tests use a short one).
 */

/** Where progress goes: stderr, or a test's stand-in. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** One piece of work: a simulation, a probe, a bench run. */
export interface ProgressTask {
  /** `fraction` of this task done (0..1); `detail`, a short status shown after it. */
  update(fraction: number, detail?: string): void;
  /** Finished: counts towards the phase's done. */
  end(): void;
}

export interface ProgressOptions {
  /** Names the command on each off-TTY line, e.g. `kvroute sim`. */
  command: string;
  quiet?: boolean;
  stream?: ProgressStream;
  /** Off-TTY line period; default KVROUTE_PROGRESS_MS or 10 s. */
  lineIntervalMs?: number;
  now?: () => number;
}

export interface PhaseOptions {
  /** Tasks the phase will run, when known. */
  total?: number;
  /** What a task is, plural ("runs", "probes"); default "tasks". */
  unit?: string;
  /** What a task's fraction measures ("simulated time"). */
  of?: string;
  /** `total` is an estimate (a search's probes still to come): shown as `3/~9 probes`. */
  estimated?: boolean;
  /** Where the phase stands beyond its task count ("policy 1/2"), shown after the count. */
  detail?: string;
}

export const PROGRESS_INTERVAL_ENV = 'KVROUTE_PROGRESS_MS';
const DEFAULT_LINE_INTERVAL_MS = 10_000;
const BAR_DELAY_MS = 1_000;
const BAR_REDRAW_MS = 100;
const BAR_WIDTH = 30;

interface TaskState {
  label: string;
  fraction: number;
  detail: string;
  startedMs: number;
}

export class Progress {
  readonly #command: string;
  readonly #mode: 'bar' | 'lines' | 'off';
  readonly #stream: ProgressStream;
  readonly #lineIntervalMs: number;
  readonly #now: () => number;
  readonly #startMs: number;
  readonly #tasks = new Map<number, TaskState>();
  #nextTask = 0;
  #phase = '';
  #phaseOpts: PhaseOptions = {};
  #phaseStartMs: number;
  #done = 0;
  #lastDrawMs = Number.NEGATIVE_INFINITY;
  #lastLineMs: number;
  #barShown = false;

  constructor(o: ProgressOptions) {
    this.#command = o.command;
    this.#stream = o.stream ?? process.stderr;
    this.#mode = o.quiet ? 'off' : this.#stream.isTTY === true ? 'bar' : 'lines';
    this.#lineIntervalMs = o.lineIntervalMs ?? intervalFromEnv() ?? DEFAULT_LINE_INTERVAL_MS;
    this.#now = o.now ?? (() => performance.now());
    this.#startMs = this.#now();
    this.#phaseStartMs = this.#startMs;
    this.#lastLineMs = this.#startMs;
  }

  /** Starts a phase; its counts start from zero. Tasks still running carry over. */
  phase(label: string, opts: PhaseOptions = {}): void {
    this.#phase = label;
    this.#phaseOpts = opts;
    this.#phaseStartMs = this.#now();
    this.#done = 0;
  }

  /**
   * Revises the current phase's options (a new estimate of its total, a new detail) and, when
   * given, its label, without restarting it: its done count and start time stay.
   */
  revise(opts: PhaseOptions, label?: string): void {
    this.#phaseOpts = { ...this.#phaseOpts, ...opts };
    if (label !== undefined) this.#phase = label;
  }

  /** A task of the current phase; report its fraction with `update`, then `end` it. */
  task(label: string): ProgressTask {
    const id = this.#nextTask++;
    this.#tasks.set(id, { label, fraction: 0, detail: '', startedMs: this.#now() });
    return {
      update: (fraction, detail) => {
        const t = this.#tasks.get(id);
        if (t === undefined) return;
        t.fraction = Math.min(1, Math.max(0, fraction));
        if (detail !== undefined) t.detail = detail;
        this.#tick();
      },
      end: () => {
        if (this.#tasks.delete(id)) this.#done++;
        this.#tick();
      },
    };
  }

  /**
   * A line for the record (a measurement, a finished probe): off a TTY it is written at once;
   * on a TTY the bar's detail shows it instead. Nothing with --quiet.
   */
  record(line: string): void {
    if (this.#mode === 'lines') this.#stream.write(`${line}\n`);
  }

  /** Clears the bar (the command prints its results next). */
  done(): void {
    if (this.#barShown) this.#stream.write('\r\x1b[K');
    this.#barShown = false;
  }

  /** What the bar and the lines say now: the phase, done and running tasks, an estimate. */
  status(): string {
    const o = this.#phaseOpts;
    const unit = o.unit ?? 'tasks';
    const parts: string[] = [];
    if (o.detail) parts.push(o.detail);
    if (o.total !== undefined)
      parts.push(`${this.#done}/${o.estimated ? '~' : ''}${o.total} ${unit}`);
    else if (this.#done > 0) parts.push(`${this.#done} ${unit} done`);
    const tasks = [...this.#tasks.values()];
    const of = o.of ? ` of ${o.of}` : '';
    if (tasks.length === 1) {
      const t = tasks[0]!;
      parts.push(`${t.label} ${percent(t.fraction)}${of}${t.detail ? ` (${t.detail})` : ''}`);
    } else if (tasks.length > 1) {
      const mean = tasks.reduce((s, t) => s + t.fraction, 0) / tasks.length;
      parts.push(`${tasks.length} running, ${percent(mean)}${of} on average`);
    }
    const left = this.#estimate(tasks);
    if (left !== null) parts.push(left);
    const head = this.#phase || this.#command;
    return parts.length > 0 ? `${head}: ${parts.join(', ')}` : head;
  }

  /** The phase's fraction when its total is known, else the running tasks' mean. */
  #fraction(tasks: TaskState[]): number {
    const running = tasks.reduce((s, t) => s + t.fraction, 0);
    const total = this.#phaseOpts.total;
    if (total !== undefined && total > 0) return Math.min(1, (this.#done + running) / total);
    return tasks.length > 0 ? running / tasks.length : 0;
  }

  #estimate(tasks: TaskState[]): string | null {
    const now = this.#now();
    const total = this.#phaseOpts.total;
    if (total !== undefined) {
      const f = this.#fraction(tasks);
      return f >= 0.01 && f < 1
        ? `~${duration(((now - this.#phaseStartMs) * (1 - f)) / f)} left`
        : null;
    }
    // Unknown total (a search): the running tasks' own estimates, the longest of them.
    let leftMs = Number.NaN;
    for (const t of tasks) {
      if (t.fraction < 0.01 || t.fraction >= 1) continue;
      const ms = ((now - t.startedMs) * (1 - t.fraction)) / t.fraction;
      if (!(ms <= leftMs)) leftMs = ms;
    }
    if (Number.isNaN(leftMs)) return null;
    return `~${duration(leftMs)} left for the current ${tasks.length > 1 ? 'ones' : 'one'}`;
  }

  #tick(): void {
    if (this.#mode === 'off') return;
    const now = this.#now();
    if (this.#mode === 'lines') {
      if (now - this.#lastLineMs < this.#lineIntervalMs) return;
      this.#lastLineMs = now;
      this.#stream.write(`${this.#command}: ${this.status()}\n`);
      return;
    }
    if (now - this.#startMs < BAR_DELAY_MS || now - this.#lastDrawMs < BAR_REDRAW_MS) return;
    this.#lastDrawMs = now;
    const f = this.#fraction([...this.#tasks.values()]);
    const filled = Math.round(f * BAR_WIDTH);
    const bar = `${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}`;
    this.#stream.write(`\r[${bar}] ${percent(f).padStart(5)} ${this.status()}\x1b[K`);
    this.#barShown = true;
  }
}

function intervalFromEnv(): number | undefined {
  const raw = process.env[PROGRESS_INTERVAL_ENV];
  if (raw === undefined || raw === '') return undefined;
  const ms = Number(raw);
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

const percent = (f: number): string => `${Math.floor(f * 100)} %`;

/** `~40 s`, `~3 min`, `~1.5 h`. */
export function duration(ms: number): string {
  const s = ms / 1000;
  if (s < 90) return `${Math.max(1, Math.round(s))} s`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
