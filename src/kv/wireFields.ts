/**
 * Readers of decoded msgpack fields that both KV event decoders share: vLLM's (wire.ts) and
 * SGLang's (engines/sglang/events.ts). A reader throws the decoder's own error class, so each
 * decoder's catch still tells a refused event from a refused batch.
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
