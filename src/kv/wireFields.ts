/**
 * Readers of decoded msgpack fields that both KV event decoders share: vLLM's (wire.ts) and
 * SGLang's (engines/sglang/events.ts), and the batch both build from its events. A reader throws
 * the decoder's own error class, so each decoder's catch still tells a refused event from a
 * refused batch.
 */

/** The class a decoder throws for a field it refuses. */
export type FieldErrorClass = new (message: string) => Error;

export interface FieldReaders {
  /** An int or a BigInt (msgpack int64) as a number; anything else is refused. */
  number(v: unknown, field: string): number;
  /** As `number`, with absent or nil read as null. */
  optNumber(v: unknown, field: string): number | null;
  /** `block_hashes`: a list, each read by the decoder's `toHash`. */
  hashes(v: unknown, toHash: (v: unknown) => bigint): bigint[];
}

export function fieldReaders(FieldError: FieldErrorClass): FieldReaders {
  const number = (v: unknown, field: string): number => {
    if (typeof v === 'number') return v;
    if (typeof v === 'bigint') return Number(v);
    throw new FieldError(`${field} is not a number`);
  };
  return {
    number,
    optNumber: (v, field) => (v === undefined || v === null ? null : number(v, field)),
    hashes: (v, toHash) => {
      if (!Array.isArray(v)) throw new FieldError('block_hashes is not a list');
      return v.map(toHash);
    },
  };
}

export function optString(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

/** A msgpack map (not a list, nil or bytes). */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** A decoded batch: its events, those skipped and those refused (each decoder's batch type). */
export interface DecodedBatch<E> {
  tsS: number;
  events: E[];
  dpRank: number | null;
  skippedEvents: number;
  malformedEvents: number;
  malformedReason: string | null;
}

/**
 * The batch of `events`, each decoded by `decode`: null is a tag it does not know (skipped); an
 * error of class `Refused` refuses that event alone (counted, the first one's reason kept); any
 * other error is thrown on.
 */
export function decodeBatchEvents<E>(
  tsS: number,
  dpRank: number | null,
  events: readonly unknown[],
  decode: (raw: unknown) => E | null,
  Refused: FieldErrorClass,
): DecodedBatch<E> {
  const out: DecodedBatch<E> = {
    tsS,
    events: [],
    dpRank,
    skippedEvents: 0,
    malformedEvents: 0,
    malformedReason: null,
  };
  for (const e of events) {
    let event: E | null;
    try {
      event = decode(e);
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      out.malformedEvents++;
      out.malformedReason ??= err.message;
      continue;
    }
    if (event) out.events.push(event);
    else out.skippedEvents++;
  }
  return out;
}
