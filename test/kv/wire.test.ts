import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { computeBlockKeys, toWireHash } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import {
  decodeEventBatch,
  decodeSeq,
  encodeEventBatch,
  encodeSeq,
  type WireBlockStored,
  WireError,
  wireHashToBlockKey,
} from '../../src/kv/wire.ts';
import { encode, make, PyFloat, V025, V026 } from '../support/msgspec.ts';

const packr = new Packr({ useRecords: false });
const pack = (v: unknown): Buffer => packr.pack(v);

const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];
// Literal keys (what computeBlockKeys gave these tokens when msgspec produced GOLDEN below): the
// fixture pins the encoding, so a new hash function must not change it.
const KEYS = [6392934880739572, 7964817818435757];
const SAMPLE: KvEvent[] = [
  {
    type: 'BlockStored',
    blockKeys: KEYS,
    parentKey: null,
    tokenIds: TOKENS,
    blockSize: 4,
    loraName: null,
    cacheSalt: 's',
  },
  { type: 'BlockRemoved', blockKeys: [KEYS[1]!] },
  { type: 'AllBlocksCleared' },
];

// The exact bytes of both forms against vLLM's struct definitions: test/kv/vllm.wire.test.ts.

test('both forms decode to the same events, hashes above 2^63 as exact BigInts', () => {
  for (const format of ['map', 'array'] as const) {
    const batch = decodeEventBatch(encodeEventBatch(SAMPLE, { tsS: 1.5, dpRank: 3, format }));
    assert.equal(batch.tsS, 1.5);
    assert.equal(batch.dpRank, 3);
    assert.equal(batch.skippedEvents, 0);
    const [stored, removed, cleared] = batch.events;
    assert.equal(stored?.type, 'BlockStored');
    const s = stored as WireBlockStored;
    assert.deepEqual(s.blockHashes, KEYS.map(toWireHash));
    assert.ok(s.blockHashes[0]! > 2n ** 63n, 'the sample exercises uint64 above 2^63');
    assert.deepEqual(s.blockHashes.map(wireHashToBlockKey), KEYS);
    assert.equal(s.parentBlockHash, null);
    assert.deepEqual(s.tokenIds, TOKENS);
    assert.equal(s.blockSize, 4);
    assert.equal(s.medium, 'GPU');
    assert.equal(s.cacheSalt, 's');
    assert.deepEqual(s.extraKeys, [['s'], null]);
    assert.deepEqual(removed, {
      type: 'BlockRemoved',
      blockHashes: [toWireHash(KEYS[1]!)],
      medium: 'GPU',
      // vLLM >= 0.26 names the KV cache group; the older array form has no such field.
      groupIdx: format === 'map' ? 0 : null,
    });
    assert.equal(s.groupIdx, format === 'map' ? 0 : null);
    assert.equal(s.kvCacheSpecKind, format === 'map' ? 'full_attention' : null);
    assert.deepEqual(cleared, { type: 'AllBlocksCleared' });
  }
});

test('round trip of random events in both forms (property)', () => {
  const event = fc.record({
    tokens: fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 16, maxLength: 80 }),
    salt: fc.option(fc.string({ minLength: 1, maxLength: 40 }), { nil: null }),
    lora: fc.option(fc.constantFrom('a', 'adapter-x'), { nil: null }),
    split: fc.nat(),
  });
  fc.assert(
    fc.property(event, fc.constantFrom('map' as const, 'array' as const), (e, format) => {
      const keys = computeBlockKeys(e.tokens, 16, {
        cacheSalt: e.salt ?? undefined,
        loraName: e.lora ?? undefined,
      });
      const cut = e.split % keys.length;
      const events: KvEvent[] = [
        {
          type: 'BlockStored',
          blockKeys: keys.slice(cut),
          parentKey: cut === 0 ? null : keys[cut - 1]!,
          tokenIds: e.tokens.slice(cut * 16, keys.length * 16),
          blockSize: 16,
          loraName: e.lora,
          cacheSalt: e.salt,
        },
        { type: 'BlockRemoved', blockKeys: keys.slice(0, 1) },
      ];
      const batch = decodeEventBatch(encodeEventBatch(events, { tsS: 12.25, format }));
      const s = batch.events[0] as WireBlockStored;
      assert.deepEqual(s.blockHashes, keys.slice(cut).map(toWireHash));
      assert.equal(s.parentBlockHash, cut === 0 ? null : toWireHash(keys[cut - 1]!));
      assert.deepEqual(s.tokenIds, e.tokens.slice(cut * 16, keys.length * 16));
      assert.equal(s.loraName, e.lora);
      // The salt rides on the block that starts the chain only, as in vLLM.
      assert.equal(s.cacheSalt, cut === 0 ? e.salt : null);
      assert.deepEqual(batch.events[1], {
        type: 'BlockRemoved',
        blockHashes: [toWireHash(keys[0]!)],
        medium: 'GPU',
        groupIdx: format === 'map' ? 0 : null,
      });
    }),
    { numRuns: 200 },
  );
});

test('hashes as small ints, signed int64, BigInts and raw bytes', () => {
  const big = 0xfedcba9876543210n;
  const sha = Buffer.alloc(32, 0);
  sha.writeBigUInt64BE(0x0123456789abcdefn, 24);
  const payload = pack([
    0,
    [
      ['BlockRemoved', [7, -1n, big, sha], 'GPU'],
      ['BlockStored', [sha], sha, [1, 2], 2, null, 'GPU'],
    ],
    0,
  ]);
  const batch = decodeEventBatch(payload);
  const removed = batch.events[0];
  assert.equal(removed?.type, 'BlockRemoved');
  assert.deepEqual(removed.type === 'BlockRemoved' && removed.blockHashes, [
    7n,
    0xffffffffffffffffn,
    big,
    // vLLM's own int form of a bytes hash: its last 8 bytes, big-endian.
    0x0123456789abcdefn,
  ]);
  const stored = batch.events[1] as WireBlockStored;
  assert.equal(stored.parentBlockHash, 0x0123456789abcdefn);
});

test('tolerance: unknown keys, missing trailing fields, extra positions, unknown tags', () => {
  const payload = pack({
    ts: 3.5,
    data_parallel_rank: 1,
    events: [
      {
        type: 'BlockStored',
        block_hashes: [1, 2],
        parent_block_hash: 9,
        token_ids: [1, 2, 3, 4],
        block_size: 2,
        brand_new_field: { nested: [1, 2, 3] },
        medium: 'GPU',
      },
      // Oldest positional form: no lora_name, no extra_keys.
      ['BlockStored', [3], null, [5, 6], 2, null, 'GPU'],
      // A newer producer with positions beyond what we know.
      ['BlockRemoved', [3], 'CPU', 4, 'future', 'more'],
      ['SomethingNew', 1, 2],
      { type: 'AlsoNew' },
      ['AllBlocksCleared'],
    ],
  });
  const batch = decodeEventBatch(payload);
  assert.equal(batch.tsS, 3.5);
  assert.equal(batch.dpRank, 1);
  assert.equal(batch.skippedEvents, 2);
  assert.equal(batch.events.length, 4);
  const a = batch.events[0] as WireBlockStored;
  assert.deepEqual(a.blockHashes, [1n, 2n]);
  assert.equal(a.parentBlockHash, 9n);
  assert.equal(a.loraName, null);
  assert.equal(a.extraKeys, null);
  assert.equal(a.cacheSalt, null);
  const b = batch.events[1] as WireBlockStored;
  assert.deepEqual(b.tokenIds, [5, 6]);
  assert.equal(b.loraName, null);
  assert.deepEqual(batch.events[2], {
    type: 'BlockRemoved',
    blockHashes: [3n],
    medium: 'CPU',
    groupIdx: 4,
  });
  assert.deepEqual(batch.events[3], { type: 'AllBlocksCleared' });
});

test('LoRA fields as vLLM defines them: lora_id, lora_name, the name first in extra_keys', () => {
  // vLLM (block_pool.py, kv_cache_utils.py): lora_id = the adapter's integer id, lora_name its
  // name, extra_keys one tuple per block: (lora_name, cache_salt on the prompt's first block).
  const toks = Array.from({ length: 48 }, (_, i) => 100 + i);
  const keys = computeBlockKeys(toks, 16, { cacheSalt: 'tenant', loraName: 'adapter-x' });
  const hashes = keys.map(toWireHash);
  const fields = {
    block_hashes: hashes,
    parent_block_hash: null,
    token_ids: toks,
    block_size: 16,
    lora_id: 12,
    medium: 'GPU',
    lora_name: 'adapter-x',
    extra_keys: [['adapter-x', 'tenant'], ['adapter-x'], ['adapter-x']],
  };
  const event: KvEvent = {
    type: 'BlockStored',
    blockKeys: keys,
    parentKey: null,
    tokenIds: toks,
    blockSize: 16,
    loraName: 'adapter-x',
    cacheSalt: 'tenant',
  };
  for (const [format, era] of [
    ['map', V026],
    ['array', V025],
  ] as const) {
    const vllm = encode(
      make(era.EventBatch, {
        ts: new PyFloat(2),
        events: [
          make(era.BlockStored, {
            ...fields,
            ...(era === V026 && { group_idx: 0, kv_cache_spec_kind: 'full_attention' }),
          }),
        ],
        data_parallel_rank: 0,
      }),
    );
    // kvroute's encoder gives vLLM's bytes...
    const ours = encodeEventBatch([event], {
      tsS: 2,
      dpRank: 0,
      format,
      loraIdOf: (n) => (n === 'adapter-x' ? 12 : null),
    });
    assert.equal(ours.toString('hex'), vllm.toString('hex'), format);
    // ...and its decoder reads vLLM's: the salt past the LoRA name, the name not taken for one.
    const s = decodeEventBatch(vllm).events[0] as WireBlockStored;
    assert.equal(s.loraId, 12);
    assert.equal(s.loraName, 'adapter-x');
    assert.equal(s.cacheSalt, 'tenant');
    assert.deepEqual(s.extraKeys, fields.extra_keys);
    assert.deepEqual(s.blockHashes, hashes);
  }
  // A continuation (parent set): no salt anywhere, the LoRA name on every block.
  const tail = encode(
    make(V026.EventBatch, {
      ts: new PyFloat(2),
      events: [
        make(V026.BlockStored, {
          ...fields,
          block_hashes: hashes.slice(1),
          parent_block_hash: hashes[0]!,
          token_ids: toks.slice(16),
          extra_keys: [['adapter-x'], ['adapter-x']],
          group_idx: 0,
          kv_cache_spec_kind: 'full_attention',
        }),
      ],
      data_parallel_rank: 0,
    }),
  );
  const t = decodeEventBatch(tail).events[0] as WireBlockStored;
  assert.equal(t.cacheSalt, null);
  assert.equal(t.loraName, 'adapter-x');
});

test('outer batch without dp rank; salt found past a LoRA name in extra keys', () => {
  const batch = decodeEventBatch(
    pack([
      1,
      [
        {
          type: 'BlockStored',
          block_hashes: [5],
          parent_block_hash: null,
          token_ids: [1, 2],
          block_size: 2,
          lora_id: 3,
          medium: 'GPU',
          lora_name: 'ad',
          extra_keys: [['ad', 'a'.repeat(64), 'tenant']],
        },
      ],
    ]),
  );
  assert.equal(batch.dpRank, null);
  const s = batch.events[0] as WireBlockStored;
  assert.equal(s.loraId, 3);
  assert.equal(s.cacheSalt, 'tenant');
  // Newer SGLang: the salt as a top-level field of the event.
  const sglang = decodeEventBatch(
    pack([
      1,
      [
        {
          type: 'BlockStored',
          block_hashes: [5],
          parent_block_hash: null,
          token_ids: [1, 2],
          block_size: 2,
          medium: 'GPU',
          cache_salt: 'tenant-b',
        },
      ],
      0,
    ]),
  );
  assert.equal((sglang.events[0] as WireBlockStored).cacheSalt, 'tenant-b');
});

test('malformed payloads throw WireError with a stable code', () => {
  for (const bad of [
    Buffer.from([0xc1]),
    pack('just a string'),
    pack([1, 'not a list', 0]),
    pack([1, [['BlockStored', 'nope', null, [1], 1]], 0]),
    pack([1, [42], 0]),
  ]) {
    assert.throws(
      () => decodeEventBatch(bad),
      (err: unknown) => {
        assert.ok(err instanceof WireError);
        assert.equal(err.code, 'ERR_WIRE_DECODE');
        return true;
      },
    );
  }
});

test('sequence frames are 8 bytes big-endian', () => {
  assert.equal(encodeSeq(0).toString('hex'), '0000000000000000');
  assert.equal(encodeSeq(258n).toString('hex'), '0000000000000102');
  assert.equal(decodeSeq(encodeSeq(2n ** 60n + 5n)), 2n ** 60n + 5n);
  assert.throws(() => decodeSeq(Buffer.alloc(4)), WireError);
});
