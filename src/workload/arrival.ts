/** One request of a workload, before its tokens are made. */
export interface Arrival {
  /** Arrival time, ms from the start of the run. */
  atMs: number;
  /** Customer, prefix group or conversation; -1 when the workload has none. */
  customer: number;
  promptLength: number;
  outputTokens: number;
  /** Seed of the request's own tokens. */
  seed: number;
  /** Mooncake trace: the record's 512-token block hash ids. */
  hashIds?: readonly number[];
  /** The LoRA adapter the request runs with (its `model`); absent: the base model. */
  lora?: string;
}

/** The lengths of a load whose prompts are a shared prefix and a part of their own. */
export interface LoadLengths {
  sharedTokens: number;
  uniqueTokens: number;
  outputTokens: number;
}

/** An arrival of such a load: the same lengths for every request, its own token seed. */
export function loadArrival(
  atMs: number,
  customer: number,
  load: LoadLengths,
  seed: number,
): Arrival {
  return {
    atMs,
    customer,
    promptLength: load.sharedTokens + load.uniqueTokens,
    outputTokens: load.outputTokens,
    seed,
  };
}
