/**
 * A line-by-line port of the scheduler seed's Python reference (reserve KV at admission, never
 * preempt), kept as the oracle the real scheduler is compared against.
 */
export interface SeedReq {
  rid: string;
  promptLen: number;
  maxNew: number;
  prefilled: number;
  generated: number;
}

export class SeedScheduler {
  readonly budget: number;
  readonly maxSeqs: number;
  readonly kvTotal: number;
  kvFree: number;
  readonly waiting: SeedReq[] = [];
  running: SeedReq[] = [];

  constructor(tokenBudget: number, maxSeqs: number, kvTokens: number) {
    this.budget = tokenBudget;
    this.maxSeqs = maxSeqs;
    this.kvTotal = kvTokens;
    this.kvFree = kvTokens;
  }

  add(rid: string, promptLen: number, maxNew: number): void {
    if (!(promptLen >= 1 && maxNew >= 1)) throw new Error('assert');
    if (promptLen + maxNew > this.kvTotal) throw new Error('request can never fit');
    this.waiting.push({ rid, promptLen, maxNew, prefilled: 0, generated: 0 });
  }

  schedule(): [SeedReq, number][] {
    let left = this.budget;
    const plan: [SeedReq, number][] = [];
    for (const r of this.running) {
      if (r.prefilled === r.promptLen && left > 0) {
        plan.push([r, 1]);
        left -= 1;
      }
    }
    for (const r of this.running) {
      if (r.prefilled < r.promptLen && left > 0) {
        const n = Math.min(r.promptLen - r.prefilled, left);
        plan.push([r, n]);
        left -= n;
      }
    }
    while (this.waiting.length > 0 && left > 0 && this.running.length < this.maxSeqs) {
      const r = this.waiting[0]!;
      const need = r.promptLen + r.maxNew;
      if (need > this.kvFree) break;
      this.waiting.shift();
      this.kvFree -= need;
      this.running.push(r);
      const n = Math.min(r.promptLen, left);
      plan.push([r, n]);
      left -= n;
    }
    return plan;
  }

  /** Applies one executed step; returns ids of requests that emitted a token. */
  complete(plan: [SeedReq, number][]): string[] {
    const emitted: string[] = [];
    for (const [r, n] of plan) {
      if (r.prefilled < r.promptLen) {
        r.prefilled += n;
        if (r.prefilled === r.promptLen) {
          r.generated = 1;
          emitted.push(r.rid);
        }
      } else {
        r.generated += 1;
        emitted.push(r.rid);
      }
    }
    for (const r of this.running.filter((x) => x.generated === x.maxNew)) {
      this.running.splice(this.running.indexOf(r), 1);
      this.kvFree += r.promptLen + r.maxNew;
    }
    return emitted;
  }
}
