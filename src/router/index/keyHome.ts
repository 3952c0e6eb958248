/**
 * Where a block key's probe starts in the index's open-addressing tables (entryTable.ts,
 * slotTable.ts), and how big such a table starts: a power of two, at least MIN_SLOTS, at most
 * half full.
 */

/** 2^-32: multiplying by it is exact, as dividing by 2^32 is, and cheaper. */
const TWO_POW_MINUS_32 = 1 / 4294967296;
const MIN_SLOTS = 1024;

/** Slots for `expectedKeys` keys at a load factor of at most 1/2. */
export function slotsFor(expectedKeys: number): number {
  let slots = MIN_SLOTS;
  while (slots < expectedKeys * 2) slots *= 2;
  return slots;
}

/** The shift that leaves the top log2(slots) bits of a 32-bit hash: `keyHome`'s `shift`. */
export function homeShift(slots: number): number {
  return 32 - Math.log2(slots);
}

/** Home slot: both 32-bit halves of the key folded, then Fibonacci hashing for the top bits. */
export function keyHome(key: number, shift: number): number {
  return Math.imul((key >>> 0) ^ ((key * TWO_POW_MINUS_32) | 0), 0x9e3779b1) >>> shift;
}
