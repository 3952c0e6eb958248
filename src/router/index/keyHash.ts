/**
 * The hashing both open-addressing tables of the index share (entryTable.ts, slotTable.ts): a
 * power-of-two slot count at load factor at most 1/2, and a key's home slot.
 */

/** 2^-32: multiplying by it is exact, as dividing by 2^32 is, and cheaper. */
const TWO_POW_MINUS_32 = 1 / 4294967296;
const MIN_SLOTS = 1024;

/** Slots for `expectedKeys` keys at load factor at most 1/2: a power of two, at least 1024. */
export function slotsFor(expectedKeys: number): number {
  let slots = MIN_SLOTS;
  while (slots < expectedKeys * 2) slots *= 2;
  return slots;
}

/** The `shift` that `homeSlot` takes for a table of `slots` slots (a power of two). */
export function homeShift(slots: number): number {
  return 32 - Math.log2(slots);
}

/** Home slot: both 32-bit halves of the key folded, then Fibonacci hashing for the top bits. */
export function homeSlot(key: number, shift: number): number {
  return Math.imul((key >>> 0) ^ ((key * TWO_POW_MINUS_32) | 0), 0x9e3779b1) >>> shift;
}
