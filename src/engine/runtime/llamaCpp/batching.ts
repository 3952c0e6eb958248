/**
 * The batching strategy that makes llama.cpp run the scheduler's plan as it is. node-llama-cpp
 * gathers the evaluations queued in one turn of the event loop into one batch and asks the
 * context's `itemPrioritizationStrategy` how many tokens of each item to process. The runtime
 * queues exactly one evaluation per plan entry, holding exactly the entry's tokens, so the
 * strategy processes every item whole: one forward pass per step. It records what it saw, so
 * a step that did not run as one batch of the plan's items is visible (and tested).
 */
import type { BatchItem, PrioritizedBatchItem } from 'node-llama-cpp';

/** One batch as llama.cpp was asked to run it: each item's tokens and the amount processed. */
export type RecordedBatch = { tokens: number[]; processAmount: number }[];

export class PlanBatching {
  /** Batches since the last `take()`. */
  #batches: RecordedBatch[] = [];
  readonly #keepTokens: boolean;

  /** `keepTokens`: record each item's token ids (for traces); else only their counts. */
  constructor(keepTokens: boolean) {
    this.#keepTokens = keepTokens;
  }

  /** The strategy to pass as `batching.itemPrioritizationStrategy`. */
  readonly strategy = ({
    items,
    size,
  }: {
    items: readonly BatchItem[];
    size: number;
  }): PrioritizedBatchItem[] => {
    const out: PrioritizedBatchItem[] = [];
    let left = size;
    for (const item of items) {
      const amount = Math.min(item.tokens.length, left);
      if (amount <= 0) break;
      out.push({ item, processAmount: amount });
      left -= amount;
    }
    this.#batches.push(
      out.map(({ item, processAmount }) => ({
        tokens: this.#keepTokens ? item.tokens.slice() : [],
        processAmount,
      })),
    );
    return out;
  };

  /** The batches recorded since the last call. */
  take(): RecordedBatch[] {
    const batches = this.#batches;
    this.#batches = [];
    return batches;
  }
}
