/**
 * The foreign-hash map (engine hash -> router key, counted per router key) against the version
 * it replaced, kept in test/support as the model: random stores, removals and clears, with few
 * hashes and a tiny vocabulary so that hashes are reused for other tokens, two hashes share a
 * router key, parents go missing and hybrid groups come and go. Every mapping must be the same,
 * and an index fed the map's events must hold each key the model counts, as many times.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EventIndex } from '../../src/router/index/eventIndex.ts';
import { type EngineHash, ForeignKeyMap, type ForeignKvEvent } from '../../src/router/index.ts';
import { ReferenceForeignKeyMap } from '../support/foreignKeysReference.ts';

const HASHES = 6;
const hash = fc.nat(HASHES - 1).map((h): EngineHash => BigInt(h) * 0x9e3779b97f4a7c15n);
/** Token runs that blocks share (two hashes for one router key). */
const RUNS = [
  [1, 2, 1, 2, 1, 2, 1, 2],
  [1, 2, 0, 0, 1, 2, 0, 0],
  [0, 1, 2, 0, 1, 2, 0, 1],
];
const group = fc.constantFrom(undefined, null, 0, 1, 2);
const kind = fc.constantFrom(undefined, null, 'full_attention', 'sliding_window', 'mamba');
const scope = fc.constantFrom(null, 'a');

const stored = fc
  .record({
    hashes: fc.array(hash, { minLength: 1, maxLength: 4 }),
    parent: fc.option(hash, { nil: null }),
    blockSize: fc.oneof({ weight: 8, arbitrary: fc.constant(2) }, fc.constantFrom(1, 0, 1.5)),
    /** Tokens short of the blocks' count by this many (a partial or missing block). */
    short: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, fc.nat(3)),
    /** One of three token runs, so that the same hash is often stored again for the same tokens. */
    vocab: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(RUNS[0]!, RUNS[1]!, RUNS[2]!) },
      fc.array(fc.nat(2), { minLength: 8, maxLength: 8 }),
    ),
    groupIdx: group,
    kvCacheSpecKind: kind,
    loraName: scope,
    cacheSalt: scope,
  })
  .map(
    (e): ForeignKvEvent => ({
      type: 'BlockStored',
      blockHashes: e.hashes,
      parentBlockHash: e.parent,
      tokenIds: e.vocab.slice(
        0,
        Math.max(0, Math.ceil(e.hashes.length * Math.max(e.blockSize, 1)) - e.short),
      ),
      blockSize: e.blockSize,
      loraName: e.loraName,
      cacheSalt: e.cacheSalt,
      groupIdx: e.groupIdx,
      kvCacheSpecKind: e.kvCacheSpecKind,
    }),
  );
const removed = fc
  .record({ hashes: fc.array(hash, { minLength: 1, maxLength: 4 }), groupIdx: group })
  .map(
    (e): ForeignKvEvent => ({ type: 'BlockRemoved', blockHashes: e.hashes, groupIdx: e.groupIdx }),
  );
const event = fc.oneof(
  { weight: 6, arbitrary: stored },
  { weight: 3, arbitrary: removed },
  { weight: 1, arbitrary: fc.constant<ForeignKvEvent>({ type: 'AllBlocksCleared' }) },
);

/** The map under test feeding an index (replica 0), and the model beside it. */
class Pair {
  readonly map = new ForeignKeyMap();
  readonly model = new ReferenceForeignKeyMap();
  readonly index = new EventIndex(1);

  /** Feeds `batch` to both; the two answer alike after it. */
  feed(batch: readonly ForeignKvEvent[], hashes: readonly EngineHash[]): void {
    const { map, model, index } = this;
    index.applyEvents(0, map.translate(batch), map.sharedKeys);
    model.translate(batch);
    assert.equal(map.size, model.size);
    assert.equal(map.unresolvedBlocks, model.unresolvedBlocks);
    for (const h of hashes) assert.equal(map.routerKey(h), model.routerKey(h));
    // Each counted key held once, and counted as often as the model counts its engine hashes.
    assert.equal(index.blockCount(0), model.refs.size);
    for (const [key, refs] of model.refs) {
      assert.ok(index.blocks.has(key, 0), `key ${key} held`);
      assert.equal(1 + (map.sharedKeys.get(key) ?? 0), refs, `key ${key} counted`);
    }
    for (const key of map.sharedKeys.keys()) assert.ok(model.refs.has(key), `key ${key} shared`);
  }
}

/**
 * Feeds `batches` to the map and to the map it replaced; the two answer alike after each.
 * `reserves[i]`, when given, is reserved before batch i (room made changes no answer).
 */
function sameAsModel(
  batches: ForeignKvEvent[][],
  hashes: readonly EngineHash[],
  reserves: readonly (number | null)[] = [],
): void {
  const pair = new Pair();
  for (const [i, batch] of batches.entries()) {
    const reserve = reserves[i];
    if (reserve != null) pair.map.reserve(reserve);
    pair.feed(batch, hashes);
  }
}

test('ForeignKeyMap answers as the map it replaced, after every batch', () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(event, { minLength: 1, maxLength: 4 }), { maxLength: 30 }),
      (batches) =>
        sameAsModel(
          batches,
          Array.from({ length: HASHES }, (_, h) => BigInt(h) * 0x9e3779b97f4a7c15n),
        ),
    ),
    { numRuns: 400 },
  );
});

test('reserving room before or between batches changes no answer', () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(event, { minLength: 1, maxLength: 4 }), { maxLength: 20 }),
      fc.array(fc.option(fc.nat(5_000), { nil: null }), { maxLength: 20 }),
      (batches, reserves) =>
        sameAsModel(
          batches,
          Array.from({ length: HASHES }, (_, h) => BigInt(h) * 0x9e3779b97f4a7c15n),
          reserves,
        ),
    ),
    { numRuns: 150 },
  );
});

test('a hash map past its first thousand handles keeps every mapping', () => {
  const pair = new Pair();
  const hashes = Array.from({ length: 3_000 }, (_, i) => BigInt(i) + 1n);
  const tokenIds = Array.from({ length: 3_000 * 4 }, (_, i) => (i * 7919) % 50_000);
  const events: ForeignKvEvent[] = [
    {
      type: 'BlockStored',
      blockHashes: hashes,
      parentBlockHash: null,
      tokenIds,
      blockSize: 4,
      loraName: null,
      cacheSalt: null,
    },
    { type: 'BlockRemoved', blockHashes: hashes.filter((_, i) => i % 3 === 0) },
    {
      type: 'BlockStored',
      blockHashes: hashes.slice(0, 600).map((h) => h + 10_000n),
      parentBlockHash: null,
      tokenIds: tokenIds.slice(0, 600 * 4),
      blockSize: 4,
      loraName: null,
      cacheSalt: null,
    },
  ];
  pair.feed(events, hashes);
  assert.equal(pair.map.size, 3_000 - 1_000 + 600);
  // The 600 later hashes share their router keys with the first 600 hashes'.
  assert.equal(pair.map.sharedKeys.size, 400);
});

/** Hashes of every kind a caller may hand in: u64 BigInts, others, and numbers and strings. */
const MIXED: EngineHash[] = [
  0n,
  7n,
  0xffff_ffff_ffff_ffffn,
  1n << 64n,
  -1n,
  -7n,
  7,
  0,
  '7',
  'ab12',
  0x9e3779b97f4a7c15n,
  0x9e3779b97f4a7c15n + (1n << 64n),
];

test('hashes of every kind stay distinct keys, as in a Map', () => {
  const mixedHash = fc.constantFrom(...MIXED);
  const mixedEvent = fc.oneof(
    {
      weight: 6,
      arbitrary: fc
        .record({
          hashes: fc.array(mixedHash, { minLength: 1, maxLength: 4 }),
          parent: fc.option(mixedHash, { nil: null }),
          tokens: fc.array(fc.nat(2), { minLength: 8, maxLength: 8 }),
        })
        .map(
          (e): ForeignKvEvent => ({
            type: 'BlockStored',
            blockHashes: e.hashes,
            parentBlockHash: e.parent,
            tokenIds: e.tokens.slice(0, e.hashes.length * 2),
            blockSize: 2,
            loraName: null,
            cacheSalt: null,
          }),
        ),
    },
    {
      weight: 3,
      arbitrary: fc
        .array(mixedHash, { minLength: 1, maxLength: 4 })
        .map((blockHashes): ForeignKvEvent => ({ type: 'BlockRemoved', blockHashes })),
    },
  );
  fc.assert(
    fc.property(
      fc.array(fc.array(mixedEvent, { minLength: 1, maxLength: 4 }), { maxLength: 30 }),
      (batches) => sameAsModel(batches, MIXED),
    ),
    { numRuns: 300 },
  );
});

for (const reserved of [0, 50_000, 7]) {
  test(`a map of 50,000 hashes (reserved for ${reserved}) keeps every mapping`, () => {
    const pair = new Pair();
    pair.map.reserve(reserved);
    const count = 50_000;
    const hashes = Array.from({ length: count }, (_, i) =>
      BigInt.asUintN(64, BigInt(i) * 0x9e3779b97f4a7c15n + 3n),
    );
    const tokenIds = Array.from({ length: count * 2 }, (_, i) => (i * 7919) % 50_000);
    const events: ForeignKvEvent[] = [
      {
        type: 'BlockStored',
        blockHashes: hashes,
        parentBlockHash: null,
        tokenIds,
        blockSize: 2,
        loraName: null,
        cacheSalt: null,
      },
      { type: 'BlockRemoved', blockHashes: hashes.filter((_, i) => i % 5 === 0) },
    ];
    pair.feed(events, hashes);
    assert.equal(pair.map.size, count - count / 5);
  });
}

test('a bogus pool size is capped: reserving 10^12 blocks takes no more than 2^20 blocks of room', () => {
  const pair = new Pair();
  const map = pair.map;
  map.reserve(1e12);
  map.reserve(Number.NaN);
  map.reserve(Number.POSITIVE_INFINITY);
  map.reserve(-5);
  const events: ForeignKvEvent[] = [
    {
      type: 'BlockStored',
      blockHashes: [1n, 2n],
      parentBlockHash: null,
      tokenIds: [1, 2, 3, 4],
      blockSize: 2,
      loraName: null,
      cacheSalt: null,
    },
  ];
  pair.feed(events, [1n, 2n]);
  assert.equal(map.size, 2);
});
