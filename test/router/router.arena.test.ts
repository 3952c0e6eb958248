/**
 * The block index's storage against plain models: the arena's holders (one replica per entry,
 * a shared bitset from two on) against a Set of replicas per entry, and the key table against a
 * Map from key to arena entry, through growth, deletions and compaction's repointing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { BlockArena, heldWord, wordsFor } from '../../src/router/index/blockArena.ts';
import { EMPTY, EntryTable } from '../../src/router/index/entryTable.ts';

/** A fleet that widens mid-run: replicas below NARROW before the widening, below WIDE after. */
const NARROW = 64;
const WIDE = 200;

type ArenaOp =
  | { kind: 'append' }
  | { kind: 'set' | 'clear'; entry: number; replica: number }
  | { kind: 'move'; from: number; to: number }
  | { kind: 'free'; entry: number }
  | { kind: 'widen' };

const arenaOp: fc.Arbitrary<ArenaOp> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'append' as const }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constantFrom('set' as const, 'clear' as const),
      entry: fc.nat(),
      // Few replicas most of the time, so that entries gather two and more holders.
      replica: fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: WIDE - 1 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('move' as const), from: fc.nat(), to: fc.nat() }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('free' as const), entry: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'widen' as const }) },
);

/** Every entry of `arena` against `model` (null: a free entry), word by word and bit by bit. */
function checkArena(arena: BlockArena, model: (Set<number> | null)[], fleet: number): void {
  assert.equal(arena.length, model.length);
  const { holder, pool, words } = arena;
  let shared = 0;
  for (let at = 0; at < model.length; at++) {
    const holders = model[at];
    assert.equal(arena.isFree(at), holders === null, `entry ${at} free`);
    const want = holders ?? new Set<number>();
    if (want.size >= 2) shared++;
    assert.equal(arena.isEmpty(at), want.size === 0, `entry ${at} empty`);
    for (let r = 0; r < fleet; r++)
      assert.equal(arena.testBit(at, r), want.has(r), `entry ${at}, replica ${r}`);
    for (let w = 0; w < words; w++) {
      let bits = 0;
      for (const r of want) if (r >>> 5 === w) bits |= 1 << (r & 31);
      assert.equal(heldWord(holder[at]!, pool, w), bits, `entry ${at}, word ${w}`);
    }
  }
  assert.equal(arena.sharedSets, shared);
}

describe('the block arena', () => {
  test('holds one replica or a shared bitset per entry, as a Set per entry does', () => {
    fc.assert(
      fc.property(fc.array(arenaOp, { minLength: 50, maxLength: 300, size: 'max' }), (ops) => {
        let fleet = NARROW;
        const arena = new BlockArena(wordsFor(fleet));
        const model: (Set<number> | null)[] = [];
        for (const op of ops) {
          switch (op.kind) {
            case 'append':
              assert.equal(arena.append(model.length * 3 + 1), model.length);
              model.push(new Set());
              break;
            case 'set':
            case 'clear': {
              if (model.length === 0) break;
              const at = op.entry % model.length;
              const holders = model[at];
              if (holders === null || holders === undefined) break;
              const replica = op.replica % fleet;
              if (op.kind === 'set') {
                assert.equal(arena.setBit(at, replica), !holders.has(replica));
                holders.add(replica);
              } else {
                assert.equal(arena.clearBit(at, replica), holders.has(replica));
                holders.delete(replica);
              }
              break;
            }
            case 'move': {
              // As compaction does: a live entry onto a free one.
              if (model.length === 0) break;
              const from = op.from % model.length;
              const to = op.to % model.length;
              if (model[from] === null || model[to] !== null) break;
              const key = arena.keys[from];
              arena.move(from, to);
              assert.equal(arena.keys[to], key);
              model[to] = model[from]!;
              model[from] = null;
              break;
            }
            case 'free': {
              // Held or not: a set still in use goes back to the pool.
              if (model.length === 0) break;
              const at = op.entry % model.length;
              arena.free(at);
              model[at] = null;
              break;
            }
            case 'widen':
              fleet = WIDE;
              arena.widen(wordsFor(fleet));
              break;
          }
          checkArena(arena, model, fleet);
        }
        // Trailing free entries can be dropped, and the next append reuses the place.
        let end = model.length;
        while (end > 0 && model[end - 1] === null) end--;
        arena.truncate(end);
        model.length = end;
        checkArena(arena, model, fleet);
      }),
      { numRuns: 150 },
    );
  });

  test('a widened fleet keeps every shared bitset and the pool free list', () => {
    const arena = new BlockArena(wordsFor(NARROW));
    for (let at = 0; at < 300; at++) {
      arena.append(at + 1);
      arena.setBit(at, at % NARROW);
      arena.setBit(at, (at * 7) % NARROW);
    }
    // Sets freed before the widening are handed out again after it.
    for (let at = 0; at < 300; at += 3) arena.free(at);
    arena.widen(wordsFor(WIDE));
    for (let at = 1; at < 300; at += 3) arena.setBit(at, WIDE - 1 - (at % 50));
    const model: (Set<number> | null)[] = [];
    for (let at = 0; at < 300; at++) {
      if (at % 3 === 0) model.push(null);
      else {
        const want = new Set([at % NARROW, (at * 7) % NARROW]);
        if (at % 3 === 1) want.add(WIDE - 1 - (at % 50));
        model.push(want);
      }
    }
    checkArena(arena, model, WIDE);
  });
});

type TableOp = { kind: 'insert' | 'delete'; k: number } | { kind: 'compact' };

const tableOp: fc.Arbitrary<TableOp> = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.record({
      kind: fc.constantFrom('insert' as const, 'insert' as const, 'delete' as const),
      k: fc.integer({ min: 0, max: 3_000 }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'compact' as const }) },
);

/** Keys spread over both 32-bit halves (the home slot folds the two). */
const keyOf = (k: number): number => k * 2 ** 20 + (k % 7);

describe('the key table', () => {
  test('maps each key to its entry as a Map does, through growth, deletes and compaction', () => {
    let grew = false;
    fc.assert(
      fc.property(fc.array(tableOp, { minLength: 1_500, maxLength: 4_000, size: 'max' }), (ops) => {
        const arena = new BlockArena(2);
        const table = new EntryTable(arena);
        const model = new Map<number, number>();
        for (const op of ops) {
          grew ||= table.slots > 1024;
          if (op.kind === 'compact') {
            // As the block index compacts: live entries slide down in order, each slot repointed
            // (found while the entry still holds its key) before the entry moves.
            let write = 0;
            for (let read = 0; read < arena.length; read++) {
              if (arena.isFree(read)) continue;
              if (read !== write) {
                const key = arena.keys[read]!;
                table.repoint(table.slotOf(key), write);
                arena.move(read, write);
                model.set(key, write);
              }
              write++;
            }
            arena.truncate(write);
            continue;
          }
          const key = keyOf(op.k);
          if (op.kind === 'insert') {
            const slot = table.probe(key);
            const at = table.entryAt(slot);
            assert.equal(at, model.get(key) ?? EMPTY);
            if (at === EMPTY) {
              const fresh = arena.append(key);
              arena.setBit(fresh, 0);
              table.put(slot, fresh);
              model.set(key, fresh);
            }
          } else {
            const slot = table.slotOf(key);
            assert.equal(slot >= 0, model.has(key));
            if (slot < 0) continue;
            const at = table.entryAt(slot);
            assert.equal(at, model.get(key));
            table.removeAt(slot);
            arena.free(at);
            model.delete(key);
          }
        }
        assert.equal(table.size, model.size);
        grew ||= table.slots > 1024;
        for (const [key, at] of model) assert.equal(table.find(key), at);
        for (let k = 0; k <= 3_000; k += 7) {
          if (!model.has(keyOf(k))) assert.equal(table.find(keyOf(k)), -1);
        }
      }),
      { numRuns: 40 },
    );
    assert.ok(grew, 'some run grew the table');
  });

  test('grows past its first size and still finds every key', () => {
    const arena = new BlockArena(2);
    const table = new EntryTable(arena);
    const first = table.slots;
    for (let k = 0; k < 5 * first; k++) table.put(table.probe(keyOf(k)), arena.append(keyOf(k)));
    assert.ok(table.slots > first);
    assert.ok(table.size * 2 <= table.slots);
    for (let k = 0; k < 5 * first; k++) assert.equal(table.find(keyOf(k)), k);
    // The arena grows by half at a time, keeping every key.
    for (let k = 0; k < 5 * first; k++) assert.equal(arena.keys[k], keyOf(k));
  });
});

describe('the key table with long probe runs', () => {
  // Keys below 2^32 whose home slot in a 1,024-slot table is one of a few slots, two of them
  // next to the end (runs wrap round), so that runs grow past 15 slots: displacements saturate
  // and a deletion must read a moved key's home from the arena.
  const HOMES = [1_020, 1_022, 3];
  const home = (key: number): number => Math.imul(key, 0x9e3779b1) >>> 22;
  const crowded: number[] = [];
  for (let key = 1; crowded.length < 90; key++) {
    if (HOMES.includes(home(key))) crowded.push(key);
  }

  test('finds, inserts and deletes as a Map does', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ insert: fc.boolean(), k: fc.nat(crowded.length - 1) }), {
          minLength: 50,
          maxLength: 600,
        }),
        (ops) => {
          const arena = new BlockArena(2);
          const table = new EntryTable(arena);
          const model = new Map<number, number>();
          for (const op of ops) {
            const key = crowded[op.k]!;
            if (op.insert) {
              const slot = table.probe(key);
              assert.equal(table.entryAt(slot), model.get(key) ?? EMPTY);
              if (table.entryAt(slot) !== EMPTY) continue;
              const at = arena.append(key);
              table.put(slot, at);
              model.set(key, at);
            } else {
              const slot = table.slotOf(key);
              assert.equal(slot >= 0, model.has(key));
              if (slot < 0) continue;
              table.removeAt(slot);
              arena.free(model.get(key)!);
              model.delete(key);
            }
            for (const k of crowded) assert.equal(table.find(k), model.get(k) ?? -1);
          }
          assert.equal(table.size, model.size);
        },
      ),
      { numRuns: 60 },
    );
  });
});
