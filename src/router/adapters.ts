/**
 * What the router knows of LoRA adapters on each replica, from two sources:
 * - the engine's report: vLLM's `vllm:lora_requests_info` gauge, whose labels name the adapters
 *   of running and waiting requests and `max_lora` (`parseLoraRequestsInfo` reads one series);
 * - its own record: adapters of the requests it routed there and that have not finished (before
 *   their first token they count as waiting, after it as running), and the adapters it routed
 *   there most recently.
 * The engine keeps at least `max_loras` adapters resident (vLLM's --max-cpu-loras >= --max-loras,
 * least recently used out), so an adapter is taken as resident where it runs or waits, or is one
 * of the last `max_loras` adapters routed there. The router never sees the engine's own cache;
 * this is the estimate a gateway can make.
 */

/** The LoRA part of an engine report. */
export interface ReplicaLoraReport {
  /** Adapters of running requests. */
  running: readonly string[];
  /** Adapters of waiting requests. */
  waiting: readonly string[];
  /** The engine's --max-loras: distinct adapters one step may run. */
  maxLoras: number;
}

/** One replica as seen for one adapter (what a policy and the slot guard read). */
export interface LoraView {
  /** The adapter runs here (reported running, or a request routed here is past its first token). */
  running: boolean;
  /** Not running, but requests for it wait here (reported, or routed and before the first token). */
  waiting: boolean;
  /** Believed resident: no load needed (see the file comment). */
  resident: boolean;
  /** Distinct adapters running or waiting here. */
  active: number;
  /** From the last report; undefined before one said. */
  maxLoras: number | undefined;
}

/** The view of a request that names no adapter: nothing to load, no slot needed. */
export const NO_LORA: Readonly<LoraView> = Object.freeze({
  running: false,
  waiting: false,
  resident: true,
  active: 0,
  maxLoras: undefined,
});

/**
 * Whether a replica can run the adapter without waiting for a slot: it runs there already, or
 * the adapters running or waiting there, this one included, are at most max_loras (unknown
 * max_loras: yes).
 */
export function hasLoraSlot(v: Readonly<LoraView>): boolean {
  if (v.running || v.maxLoras === undefined) return true;
  return v.active + (v.waiting ? 0 : 1) <= v.maxLoras;
}

/**
 * A `vllm:lora_requests_info` series' labels as a report; null when `max_lora` is missing or not
 * a positive integer. A gateway scraping several series takes the one with the largest value
 * (vLLM sets it to the time the adapter sets were last current).
 */
export function parseLoraRequestsInfo(
  labels: Readonly<Record<string, string>>,
): ReplicaLoraReport | null {
  const maxLoras = Number(labels.max_lora);
  if (!Number.isInteger(maxLoras) || maxLoras < 1) return null;
  const names = (v: string | undefined) => (v ? v.split(',').filter((s) => s !== '') : []);
  return {
    running: names(labels.running_lora_adapters),
    waiting: names(labels.waiting_lora_adapters),
    maxLoras,
  };
}

/** Adapters the router remembers per replica, most recent first, at most this many. */
const RECENT_ADAPTERS = 64;

interface InFlight {
  beforeFirstToken: number;
  afterFirstToken: number;
}

class ReplicaAdapters {
  readonly inFlight = new Map<string, InFlight>();
  /** Most recently routed first. */
  recent: string[] = [];
}

export class AdapterTracker {
  #replicas: ReplicaAdapters[] = [];

  ensureReplicas(count: number): void {
    while (this.#replicas.length < count) this.#replicas.push(new ReplicaAdapters());
  }

  /** A request for `lora` was routed to `replica`. */
  routed(replica: number, lora: string): void {
    const r = this.#replicas[replica]!;
    const f = r.inFlight.get(lora);
    if (f) f.beforeFirstToken++;
    else r.inFlight.set(lora, { beforeFirstToken: 1, afterFirstToken: 0 });
    const at = r.recent.indexOf(lora);
    if (at !== 0) {
      if (at > 0) r.recent.splice(at, 1);
      r.recent.unshift(lora);
      if (r.recent.length > RECENT_ADAPTERS) r.recent.length = RECENT_ADAPTERS;
    }
  }

  firstToken(replica: number, lora: string): void {
    const f = this.#replicas[replica]!.inFlight.get(lora);
    if (!f) return;
    f.beforeFirstToken--;
    f.afterFirstToken++;
  }

  /** Finished, aborted or failed; `decoding`: it had its first token. */
  finished(replica: number, lora: string, decoding: boolean): void {
    const r = this.#replicas[replica]!;
    const f = r.inFlight.get(lora);
    if (!f) return;
    if (decoding) f.afterFirstToken--;
    else f.beforeFirstToken--;
    if (f.beforeFirstToken <= 0 && f.afterFirstToken <= 0) r.inFlight.delete(lora);
  }

  /** The replica is cold (back from down, or removed): nothing of it is resident any more. */
  forget(replica: number): void {
    this.#replicas[replica]!.recent = [];
  }

  /** `replica` as seen for `lora`, from the router's record and the last report. */
  view(replica: number, lora: string, report: ReplicaLoraReport | undefined): LoraView {
    const r = this.#replicas[replica]!;
    const f = r.inFlight.get(lora);
    const running = (report?.running.includes(lora) ?? false) || (f?.afterFirstToken ?? 0) > 0;
    const waiting =
      !running && ((report?.waiting.includes(lora) ?? false) || (f?.beforeFirstToken ?? 0) > 0);
    const maxLoras = report?.maxLoras;
    const recentAt = r.recent.indexOf(lora);
    return {
      running,
      waiting,
      resident: running || waiting || (recentAt >= 0 && recentAt < (maxLoras ?? 1)),
      active: this.activeAdapters(replica, report).length,
      maxLoras,
    };
  }

  /** Distinct adapters running or waiting on `replica`: reported, or routed and unfinished. */
  activeAdapters(replica: number, report: ReplicaLoraReport | undefined): string[] {
    const active = new Set(this.#replicas[replica]!.inFlight.keys());
    for (const name of report?.running ?? []) active.add(name);
    for (const name of report?.waiting ?? []) active.add(name);
    return [...active];
  }
}
