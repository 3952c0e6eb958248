/**
 * Builds one step's plan: entries in scheduling order, the budget left, and the sums the cost
 * model needs. A request preempted after it was planned is dropped and its tokens refunded.
 */
import type { Seq } from './seq.ts';
import type { PlanEntry, PlanEntryKind, StepPlan } from './types.ts';

export class PlanBuilder {
  readonly stepIndex: number;
  leftTokens: number;
  readonly admitted: string[] = [];
  readonly preempted: string[] = [];
  /** Allocated at the expected size once (pushes would grow them several times a step). */
  readonly #entries: PlanEntry[];
  /** The planned requests, parallel to the entries; null where one was dropped. */
  readonly #seqs: (Seq | null)[];
  #count = 0;
  #dropped = 0;
  #prefillTokens = 0;
  #decodeTokens = 0;
  #kvTokensRead = 0;

  /** `expectedEntries`: about how many requests the step will plan (more may be added). */
  constructor(stepIndex: number, budgetTokens: number, expectedEntries = 0) {
    this.stepIndex = stepIndex;
    this.leftTokens = budgetTokens;
    this.#entries = new Array<PlanEntry>(expectedEntries);
    this.#seqs = new Array<Seq | null>(expectedEntries);
  }

  /** Entries planned and not dropped. */
  get planned(): number {
    return this.#count - this.#dropped;
  }

  add(seq: Seq, kind: PlanEntryKind, tokens: number): void {
    const at = this.#count++;
    seq.plannedStep = this.stepIndex;
    seq.planIndex = at;
    const contextTokens = seq.computedTokens;
    this.#entries[at] = { id: seq.id, kind, tokens, contextTokens };
    this.#seqs[at] = seq;
    this.leftTokens -= tokens;
    if (kind === 'decode') this.#decodeTokens += tokens;
    else this.#prefillTokens += tokens;
    // A decode reads its whole context plus the new token; a chunk reads what came before it.
    this.#kvTokensRead += kind === 'decode' ? contextTokens + tokens : contextTokens;
  }

  /** Takes `seq` out of this step's plan, if it is in it, and refunds its tokens. */
  drop(seq: Seq): void {
    if (seq.plannedStep !== this.stepIndex) return;
    seq.plannedStep = -1;
    const entry = this.#entries[seq.planIndex]!;
    this.#seqs[seq.planIndex] = null;
    this.#dropped++;
    this.leftTokens += entry.tokens;
    if (entry.kind === 'decode') this.#decodeTokens -= entry.tokens;
    else this.#prefillTokens -= entry.tokens;
    this.#kvTokensRead -=
      entry.kind === 'decode' ? entry.contextTokens + entry.tokens : entry.contextTokens;
  }

  /** The plan, and the requests behind its entries (same order), for `complete`. */
  build(): { plan: StepPlan; seqs: Seq[] } {
    let entries = this.#entries;
    let seqs = this.#seqs as Seq[];
    // Cut to the entries planned; a length set is a call out of compiled code even when it
    // changes nothing, and most steps plan exactly the requests they expected.
    if (entries.length !== this.#count) {
      entries.length = this.#count;
      seqs.length = this.#count;
    }
    if (this.#dropped > 0) {
      entries = entries.filter((_, i) => this.#seqs[i] !== null);
      seqs = this.#seqs.filter((seq): seq is Seq => seq !== null);
    }
    const plan: StepPlan = {
      stepIndex: this.stepIndex,
      entries,
      prefillTokens: this.#prefillTokens,
      decodeTokens: this.#decodeTokens,
      kvTokensRead: this.#kvTokensRead,
      admitted: this.admitted,
      preempted: this.preempted,
    };
    return { plan, seqs };
  }
}
