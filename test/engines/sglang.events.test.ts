/**
 * SGLang's KV events: the decoder against bytes built from SGLang's own struct definitions
 * (test/support/sglangWire.ts, transcribed from disaggregation/kv_events.py) and one literal
 * fixture, and the page chain that re-cuts SGLang's pages into the router's blocks, checked
 * against the router's own keys of the same tokens.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeSglangBatch, parseSglangTopic } from '../../src/engines/sglang/events.ts';
import { SglangEventFeed } from '../../src/engines/sglang/feed.ts';
import { SglangPageChain } from '../../src/engines/sglang/pages.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { type ForeignKvEvent, ForeignKeyMap } from '../../src/router/index.ts';
import { encode, make, PyFloat } from '../support/msgspec.ts';
import {
  pageChain,
  pageDigest,
  publishedHash,
  SGL,
  SGL_OLD,
  sglBatch,
  sglRemoved,
  sglStored,
} from '../support/sglangWire.ts';

const u64 = (h: bigint): bigint => BigInt.asUintN(64, h);

test('a literal SGLang batch: the struct transcription writes these bytes, the decoder reads them', () => {
  // [1.5, [["BlockStored", [-1], None, [7, 8], 2, None, "GPU"]], 0]
  const literal = Buffer.from(
    '93cb3ff8000000000000' +
      '9197ab426c6f636b53746f726564' +
      '91ffc0920708' +
      '02c0a3475055' +
      '00',
    'hex',
  );
  const built = encode(
    make(SGL.EventBatch, {
      ts: new PyFloat(1.5),
      events: [sglStored({ hashes: [-1n], parent: null, tokens: [7, 8], pageSize: 2 })],
      attn_dp_rank: 0,
    }),
  );
  assert.deepEqual(built, literal);
  const batch = decodeSglangBatch(literal);
  assert.equal(batch.tsS, 1.5);
  assert.equal(batch.dpRank, 0);
  assert.deepEqual(batch.events, [
    {
      type: 'BlockStored',
      pageHashes: [0xffffffffffffffffn],
      parentPageHash: null,
      tokenIds: [7, 8],
      pageSize: 2,
      loraId: null,
      medium: 'GPU',
      cacheSalt: null,
    },
  ]);
});

test('the page hash chain is SGLang get_hash_str: SHA-256 over the prior digest and u32 LE tokens', () => {
  // sha256(b"\x01\x00\x00\x00") starts 0x67abdd721024f0ff: positive as int64.
  const d = pageDigest([1], null);
  assert.equal(d.toString('hex').slice(0, 16), '67abdd721024f0ff');
  assert.equal(publishedHash(d), 0x67abdd721024f0ffn);
});

test('current SGLang: signed hashes, medium, metadata salt, removals, clears, dp rank', () => {
  const toks = [11, 12, 13, 14, 15, 16];
  const { hashes } = pageChain(toks, 2);
  const payload = encode(
    sglBatch(
      [
        sglStored({ hashes, parent: null, tokens: toks, pageSize: 2, cacheSalt: 'tenant-a' }),
        sglRemoved([hashes[2]!]),
        sglStored({
          hashes: [5n],
          parent: null,
          tokens: [1, 2],
          pageSize: 2,
          medium: 'CPU_PINNED',
        }),
        make(SGL.AllBlocksCleared),
      ],
      3,
    ),
  );
  const batch = decodeSglangBatch(payload);
  assert.equal(batch.dpRank, 3);
  assert.equal(batch.malformedEvents, 0);
  const [stored, removed, tier, cleared] = batch.events;
  assert.deepEqual(stored, {
    type: 'BlockStored',
    pageHashes: hashes.map(u64),
    parentPageHash: null,
    tokenIds: toks,
    pageSize: 2,
    loraId: null,
    medium: 'GPU',
    cacheSalt: 'tenant-a',
  });
  assert.deepEqual(removed, { type: 'BlockRemoved', pageHashes: [u64(hashes[2]!)], medium: 'GPU' });
  assert.equal(tier?.type === 'BlockStored' && tier.medium, 'CPU_PINNED');
  assert.deepEqual(cleared, { type: 'AllBlocksCleared' });
});

test('older SGLang (omit_defaults, no medium, no rank) decodes with medium and rank null', () => {
  const payload = encode(
    make(SGL_OLD.EventBatch, {
      ts: new PyFloat(2),
      events: [
        make(SGL_OLD.BlockStored, {
          block_hashes: [9n],
          parent_block_hash: 8n,
          token_ids: [4],
          block_size: 1,
          lora_id: null,
        }),
        make(SGL_OLD.BlockRemoved, { block_hashes: [9n] }),
      ],
    }),
  );
  const batch = decodeSglangBatch(payload);
  assert.equal(batch.dpRank, null);
  assert.equal(batch.events[0]?.type === 'BlockStored' && batch.events[0].medium, null);
  assert.deepEqual(batch.events[1], { type: 'BlockRemoved', pageHashes: [9n], medium: null });
});

test('EAGLE bigram pages carry (token, next) pairs: the first of each pair is the token', () => {
  const payload = encode(
    sglBatch([
      sglStored({ hashes: [1n], parent: null, tokens: [], pageSize: 2 }),
      make(SGL.BlockStored, {
        block_hashes: [2n],
        parent_block_hash: null,
        token_ids: [
          [5, 6],
          [6, 7],
        ],
        block_size: 2,
        lora_id: null,
        medium: 'GPU',
      }),
    ]),
  );
  const batch = decodeSglangBatch(payload);
  // The first event has no tokens for its page: refused, the second is read.
  assert.equal(batch.malformedEvents, 1);
  assert.deepEqual(batch.events[0]?.type === 'BlockStored' && batch.events[0].tokenIds, [5, 6]);
});

test('unknown tags are skipped; a payload that is no batch throws', () => {
  const payload = encode(
    make(SGL.EventBatch, {
      ts: new PyFloat(1),
      events: [make(SGL.AllBlocksCleared), ['SomethingNew', 1]],
      attn_dp_rank: 0,
    }),
  );
  assert.equal(decodeSglangBatch(payload).skippedEvents, 1);
  assert.throws(() => decodeSglangBatch(Buffer.from([0xc1])), { code: 'ERR_SGLANG_WIRE_DECODE' });
  assert.throws(() => decodeSglangBatch(encode(7)), { code: 'ERR_SGLANG_WIRE_DECODE' });
});

test('topics: plain, with the snapshot epoch, and a snapshot barrier', () => {
  assert.deepEqual(parseSglangTopic(Buffer.from('kv')), {
    topic: 'kv',
    epoch: null,
    snapshotBarrier: null,
  });
  assert.deepEqual(parseSglangTopic(Buffer.from('kv\0sgl-kv-epoch=e1')), {
    topic: 'kv',
    epoch: 'e1',
    snapshotBarrier: null,
  });
  assert.deepEqual(parseSglangTopic(Buffer.from('\0sgl-kv-epoch=e1\0sgl-kv-snapshot=b7')), {
    topic: '',
    epoch: 'e1',
    snapshotBarrier: 'b7',
  });
});

/** Feeds translated events through a foreign-key map; returns the router keys stored/removed. */
function routerKeys(
  map: ForeignKeyMap,
  events: ForeignKvEvent[],
): { stored: number[]; removed: number[] } {
  const stored: number[] = [];
  const removed: number[] = [];
  for (const e of map.translate(events)) {
    if (e.type === 'BlockStored') stored.push(...e.blockKeys);
    else if (e.type === 'BlockRemoved') removed.push(...e.blockKeys);
  }
  return { stored, removed };
}

const runs = (n: number, seed: number): number[] =>
  Array.from({ length: n }, (_, i) => 100 + ((i * 7919 + seed * 104729) % 5000));

for (const [pageSize, blockSize] of [
  [1, 4],
  [2, 4],
  [4, 4],
  [8, 4],
  [3, 4],
] as const) {
  test(`pages of ${pageSize} cut into router blocks of ${blockSize}: the router's own keys`, () => {
    const chain = new SglangPageChain(blockSize);
    const map = new ForeignKeyMap();
    const shared = runs(24, 1);
    const a = [...shared, ...runs(12, 2)];
    const b = [...shared, ...runs(12, 3)];
    const pa = pageChain(a, pageSize);
    const pb = pageChain(b, pageSize);
    const pagesA = pa.hashes.length;
    const sharedPages = Math.floor(shared.length / pageSize);
    // Request A stores all its pages, as one radix node, in two events split mid-chain.
    const cut = Math.max(1, Math.floor(pagesA / 3));
    const evA1 = chain.translate([
      stored(pa.hashes.slice(0, cut), null, a.slice(0, cut * pageSize), pageSize),
    ]);
    const evA2 = chain.translate([
      stored(
        pa.hashes.slice(cut),
        pa.hashes[cut - 1]!,
        a.slice(cut * pageSize, pagesA * pageSize),
        pageSize,
      ),
    ]);
    const gotA = [...routerKeys(map, evA1).stored, ...routerKeys(map, evA2).stored];
    const fullA = Math.floor((pagesA * pageSize) / blockSize);
    assert.deepEqual(gotA, computeBlockKeys(a, blockSize).slice(0, fullA));
    // Request B shares the prefix's pages: only its own pages, parent the last shared page.
    const evB = chain.translate([
      stored(
        pb.hashes.slice(sharedPages),
        pb.hashes[sharedPages - 1]!,
        b.slice(sharedPages * pageSize, pb.hashes.length * pageSize),
        pageSize,
      ),
    ]);
    const gotB = routerKeys(map, evB).stored;
    const keysB = computeBlockKeys(b, blockSize).slice(
      0,
      Math.floor((pb.hashes.length * pageSize) / blockSize),
    );
    assert.deepEqual(gotB, keysB.slice(keysB.length - gotB.length));
    assert.ok(gotB.length > 0);
    // Evicting B's leaf removes exactly B's own router blocks (those past the shared prefix).
    const evict = routerKeys(map, chain.translate([removed(pb.hashes.slice(sharedPages))]));
    assert.deepEqual(new Set(evict.removed), new Set(gotB));
    assert.deepEqual(evict.stored, []);
  });
}

test('a store whose parent page is unknown is dropped and counted; a clear forgets every page', () => {
  const chain = new SglangPageChain(2);
  assert.deepEqual(chain.translate([stored([1n, 2n], 99n, [1, 2, 3, 4], 2)]), []);
  assert.equal(chain.stats().unresolvedPages, 2);
  chain.translate([stored([1n], null, [1, 2], 2)]);
  assert.equal(chain.stats().pages, 1);
  assert.deepEqual(chain.translate([{ type: 'AllBlocksCleared' }]), [{ type: 'AllBlocksCleared' }]);
  assert.equal(chain.stats().pages, 0);
  chain.translate([{ ...stored([3n], null, [1, 2], 2), medium: 'CPU_PINNED' }]);
  assert.equal(chain.stats().tierEvents, 1);
});

test('the feed decodes a payload into router blocks and resets on restart', () => {
  const toks = runs(8, 5);
  const { hashes } = pageChain(toks, 1);
  const feed = new SglangEventFeed(4);
  const out = feed.decode(
    encode(sglBatch([sglStored({ hashes, parent: null, tokens: toks, pageSize: 1 })])),
  );
  assert.equal(out.malformedEvents, 0);
  const map = new ForeignKeyMap();
  assert.deepEqual(routerKeys(map, out.events).stored, computeBlockKeys(toks, 4));
  feed.reset();
  assert.equal(feed.stats().pages, 0);
});

function stored(
  pageHashes: bigint[],
  parent: bigint | null,
  tokenIds: number[],
  pageSize: number,
): Extract<Parameters<SglangPageChain['translate']>[0][number], { type: 'BlockStored' }> {
  return {
    type: 'BlockStored',
    pageHashes: pageHashes.map(u64),
    parentPageHash: parent === null ? null : u64(parent),
    tokenIds,
    pageSize,
    loraId: null,
    medium: 'GPU',
    cacheSalt: null,
  };
}

const removed = (pageHashes: bigint[]) => ({
  type: 'BlockRemoved' as const,
  pageHashes: pageHashes.map(u64),
  medium: 'GPU',
});
