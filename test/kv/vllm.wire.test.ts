/**
 * vLLM's KV event bytes, built from vLLM's own struct definitions (test/support/msgspec.ts), not
 * from kvroute's encoder: what the engine publishes must equal them, and what the gateway's
 * decoder, hash map and router make of them must route as a vLLM cache would hit.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { computeBlockKeys, toWireHash } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import {
  decodeEventBatch,
  encodeEventBatch,
  readReplayReply,
  replayBatchFrames,
  replayEndFrames,
  type WireBlockStored,
} from '../../src/kv/wire.ts';
import { type ForeignKvEvent, Router } from '../../src/router/index.ts';
import { BLOCK, tokens as tokenStream } from '../support/routing.ts';
import {
  END_SEQ,
  encode,
  make,
  type Py,
  PyDict,
  PyFloat,
  seqBytes,
  V025,
  V026,
} from '../support/msgspec.ts';

const tokens = (seed: number, count: number): number[] => tokenStream(seed, count, 5, 120_000);

/** A vLLM batch as its publisher encodes it (`data_parallel_rank` stamped by publish()). */
const batch = (era: typeof V025 | typeof V026, events: Py[], ts = 1.5, dpRank = 0): Buffer =>
  encode(make(era.EventBatch, { ts: new PyFloat(ts), events, data_parallel_rank: dpRank }));

/** Decodes vLLM bytes as the gateway's subscriber does and feeds them to a router replica. */
function feed(router: Router, replica: string, payload: Buffer): void {
  router.applyForeignEvents(replica, decodeEventBatch(payload).events as ForeignKvEvent[], 0);
}

/** Prompt tokens the router would serve from `replica`'s cache for this prompt. */
function cachedOn(router: Router, replica: string, toks: number[], salt?: string): number {
  const blockKeys = computeBlockKeys(toks, BLOCK, { cacheSalt: salt });
  const id = `q${Math.random()}`;
  const view = router.route({ id, blockKeys, promptTokens: toks.length, blockSize: BLOCK }, 0);
  router.onFinished(id, 0);
  return view.replica === replica ? view.cachedTokens : -view.bestCachedTokens;
}

/** The BlockStored fields with no default, for a chain that starts a prompt, as vLLM fills them. */
const headOf = (hashes: Py, tokenIds: number[]) => ({
  block_hashes: hashes,
  parent_block_hash: null,
  token_ids: tokenIds,
  block_size: BLOCK,
  lora_id: null,
  medium: 'GPU',
  lora_name: null,
});

/** An engine-side hash for block b of a prompt (any 64-bit value: the router never reads it). */
const engineHash = (seed: number, b: number): bigint =>
  BigInt.asUintN(64, 0x9e3779b97f4a7c15n * BigInt(seed * 1000 + b + 1));

describe("kvroute's engine publishes vLLM's bytes", () => {
  const toks = tokens(1, 32);
  const keys = computeBlockKeys(toks, BLOCK, { cacheSalt: 's' });
  const events: KvEvent[] = [
    {
      type: 'BlockStored',
      blockKeys: keys,
      parentKey: null,
      tokenIds: toks,
      blockSize: BLOCK,
      loraName: null,
      cacheSalt: 's',
    },
    { type: 'BlockRemoved', blockKeys: [keys[1]!] },
    { type: 'AllBlocksCleared' },
  ];
  const hashes = keys.map(toWireHash);

  test('map form = vLLM >= 0.26 (tagged maps, group_idx 0, full_attention)', () => {
    const expected = batch(V026, [
      make(V026.BlockStored, {
        ...headOf(hashes, toks),
        extra_keys: [['s'], null],
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      }),
      make(V026.BlockRemoved, { block_hashes: [hashes[1]!], medium: 'GPU', group_idx: 0 }),
      make(V026.AllBlocksCleared),
    ]);
    const ours = encodeEventBatch(events, { tsS: 1.5, dpRank: 0, format: 'map' });
    assert.equal(ours.toString('hex'), expected.toString('hex'));
  });

  test('array form = the last array_like vLLM (tag first, 8 fields)', () => {
    const expected = batch(V025, [
      make(V025.BlockStored, {
        ...headOf(hashes, toks),
        extra_keys: [['s'], null],
      }),
      make(V025.BlockRemoved, { block_hashes: [hashes[1]!], medium: 'GPU' }),
      make(V025.AllBlocksCleared),
    ]);
    const ours = encodeEventBatch(events, { tsS: 1.5, dpRank: 0, format: 'array' });
    assert.equal(ours.toString('hex'), expected.toString('hex'));
  });
});

describe('a vLLM 0.26.0 batch (the dump in kthena issue #1535)', () => {
  // The dump's token ids are elided between its first and last; the 14 in between are filled in.
  const dumpTokens = [
    151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198, 9707,
    151667,
  ];
  const fromDefinitions = batch(
    V026,
    [
      make(V026.BlockStored, {
        ...headOf([15760518052499183552n], dumpTokens),
        extra_keys: [null],
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
      }),
    ],
    1789095808.8378847,
    0,
  );

  test('its bytes, checked by hand against msgpack', () => {
    const hex = [
      '93', // EventBatch: array of 3 (array_like)
      'cb41daa8dbe0359fe7', // ts: float64 1789095808.8378847
      '91', // one event
      '8b', // map of 11: the tag and 10 fields (event_version = 1 is its default: omitted)
      'a474797065ab426c6f636b53746f726564', // "type": "BlockStored"
      'ac626c6f636b5f68617368657391cfdab89baa7b5857c0', // block_hashes: [uint64 ...552]
      'b1706172656e745f626c6f636b5f68617368c0', // parent_block_hash: None
      'a9746f6b656e5f696473dc0010', // token_ids: array16 of 16
      'ce0002505ccd22f4ccc6cd0a32cd020dcd0108cd2ac6cd45b70dce0002505dccc6ce0002505ccd0368ccc6cd25ebce00025073',
      'aa626c6f636b5f73697a6510', // block_size: 16
      'a76c6f72615f6964c0', // lora_id: None
      'a66d656469756da3475055', // medium: "GPU"
      'a96c6f72615f6e616d65c0', // lora_name: None
      'aa65787472615f6b65797391c0', // extra_keys: [None]
      'a967726f75705f69647800', // group_idx: 0
      'b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e', // kind
      '00', // data_parallel_rank: 0
    ].join('');
    assert.equal(fromDefinitions.toString('hex'), hex);
  });

  test('decodes to its fields, and the block routes warm on its token ids', () => {
    const decoded = decodeEventBatch(fromDefinitions);
    assert.equal(decoded.tsS, 1789095808.8378847);
    assert.equal(decoded.dpRank, 0);
    const s = decoded.events[0] as WireBlockStored;
    assert.deepEqual(s.blockHashes, [15760518052499183552n]);
    assert.deepEqual(s.tokenIds, dumpTokens);
    assert.equal(s.groupIdx, 0);
    assert.equal(s.kvCacheSpecKind, 'full_attention');
    assert.equal(s.cacheSalt, null);
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    feed(router, 'b', fromDefinitions);
    assert.equal(cachedOn(router, 'b', [...dumpTokens, 1, 2, 3]), 16);
  });
});

describe('hybrid models: a block stays cached while a full-attention group holds it', () => {
  const toks = tokens(7, 64 * BLOCK);
  const hashes = Array.from({ length: 64 }, (_, b) => engineHash(7, b));
  const stored = (groupIdx: number, kind: string) =>
    make(V026.BlockStored, {
      ...headOf(hashes, toks),
      extra_keys: hashes.map(() => null),
      group_idx: groupIdx,
      kv_cache_spec_kind: kind,
    });
  // vLLM's block pool removes one block per event (`_maybe_evict_cached_block`).
  const removedAll = (groupIdx: number) =>
    hashes.map((h) =>
      make(V026.BlockRemoved, { block_hashes: [h], medium: 'GPU', group_idx: groupIdx }),
    );

  test('a sliding-window group dropping its blocks leaves the full-attention ones', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    feed(router, 'b', batch(V026, [stored(0, 'full_attention'), stored(1, 'sliding_window')]));
    assert.equal(cachedOn(router, 'b', toks), 64 * BLOCK);
    feed(router, 'b', batch(V026, removedAll(1)));
    assert.equal(cachedOn(router, 'b', toks), 64 * BLOCK, 'the full-attention group holds them');
    feed(router, 'b', batch(V026, removedAll(0)));
    assert.equal(cachedOn(router, 'b', toks), 0);
  });

  test('the sliding-window group reported first: its blocks stop counting once a full one appears', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    const other = tokens(8, 8 * BLOCK);
    feed(
      router,
      'b',
      batch(V026, [
        make(V026.BlockStored, {
          ...headOf(
            other.slice(0, 8).map((_, b) => engineHash(8, b)),
            other,
          ),
          group_idx: 1,
          kv_cache_spec_kind: 'sliding_window',
        }),
      ]),
    );
    // Only a sliding-window group known: a sliding-window-only model still routes warm.
    assert.equal(cachedOn(router, 'b', other), 8 * BLOCK);
    feed(router, 'b', batch(V026, [stored(0, 'full_attention')]));
    assert.equal(cachedOn(router, 'b', toks), 64 * BLOCK);
    assert.equal(cachedOn(router, 'b', other), 0, 'held by the sliding-window group only');
  });

  test('mamba and sliding-window groups never hold a block up on their own', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    feed(
      router,
      'b',
      batch(V026, [stored(0, 'full_attention'), stored(1, 'mamba'), stored(2, 'sliding_window')]),
    );
    feed(router, 'b', batch(V026, removedAll(0)));
    assert.equal(cachedOn(router, 'b', toks), 0);
  });
});

describe('cache_salt in extra_keys', () => {
  const salt = `${'a'.repeat(40)}0123456789abcdef01234567`; // 64 hex digits: still a salt
  const toks = tokens(9, 4 * BLOCK);
  const hashes = [0, 1, 2, 3].map((b) => engineHash(9, b));
  const cases: [string, Buffer][] = [
    [
      'vLLM >= 0.26, a plain string',
      batch(V026, [
        make(V026.BlockStored, {
          ...headOf(hashes, toks),
          extra_keys: [[salt], null, null, null],
          group_idx: 0,
          kv_cache_spec_kind: 'full_attention',
        }),
      ]),
    ],
    [
      'vLLM < 0.26, after a LoRA name and a multimodal key',
      batch(V025, [
        make(V025.BlockStored, {
          block_hashes: hashes,
          parent_block_hash: null,
          token_ids: toks,
          block_size: BLOCK,
          lora_id: 1,
          medium: 'GPU',
          lora_name: 'adapter',
          extra_keys: [['adapter', ['mm-hash', 3], salt], ['adapter'], ['adapter'], ['adapter']],
        }),
      ]),
    ],
    [
      'typed extra keys ({"type": "cache_salt", "salt": ...})',
      batch(V026, [
        make(V026.BlockStored, {
          ...headOf(hashes, toks),
          event_version: 1,
          extra_keys: [[make(V026.CacheSaltKey, { salt })], null, null, null],
        }),
      ]),
    ],
  ];
  for (const [name, payload] of cases) {
    test(name, () => {
      const s = decodeEventBatch(payload).events[0] as WireBlockStored;
      assert.equal(s.cacheSalt, salt);
      const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
      const lora = s.loraName;
      router.applyForeignEvents('b', [{ ...s, loraName: lora }], 0);
      const blockKeys = computeBlockKeys(toks, BLOCK, {
        cacheSalt: salt,
        loraName: lora ?? undefined,
      });
      const d = router.route(
        { id: 'x', blockKeys, promptTokens: toks.length, blockSize: BLOCK },
        0,
      );
      assert.equal(d.replica, 'b');
      assert.equal(d.cachedTokens, 4 * BLOCK);
    });
  }

  test('salted blocks do not serve an unsalted prompt', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    feed(router, 'b', cases[0]![1]);
    assert.ok(cachedOn(router, 'b', toks) <= 0);
    assert.equal(cachedOn(router, 'b', toks, salt), 4 * BLOCK);
  });
});

describe('replay replies, both forms', () => {
  const payload = batch(V026, [make(V026.AllBlocksCleared)]);

  test('vLLM >= 0.26: [empty, topic, seq, payload], end [empty, "", END_SEQ, ""]', () => {
    // What the ROUTER sends after the client's identity (vllm PR #45177).
    const frames = [Buffer.alloc(0), Buffer.from('kv'), seqBytes(7), payload];
    assert.deepEqual(readReplayReply(frames), {
      kind: 'batch',
      form: 'topic',
      topic: Buffer.from('kv'),
      seq: 7n,
      payload,
    });
    const end = [Buffer.alloc(0), Buffer.alloc(0), END_SEQ, Buffer.alloc(0)];
    assert.deepEqual(readReplayReply(end), { kind: 'end', form: 'topic' });
    assert.deepEqual(replayBatchFrames('topic', Buffer.from('kv'), 7n, payload), frames);
    assert.deepEqual(replayEndFrames('topic'), end);
  });

  test('older vLLM and SGLang: [empty, seq, payload], end [empty, END_SEQ, ""]', () => {
    const frames = [Buffer.alloc(0), seqBytes(2n ** 40n), payload];
    const reply = readReplayReply(frames);
    assert.equal(reply.kind, 'batch');
    assert.equal(reply.kind === 'batch' && reply.seq, 2n ** 40n);
    assert.equal(reply.form, 'no-topic');
    const end = [Buffer.alloc(0), END_SEQ, Buffer.alloc(0)];
    assert.deepEqual(readReplayReply(end), { kind: 'end', form: 'no-topic' });
    assert.deepEqual(replayBatchFrames('no-topic', Buffer.from('kv'), 2n ** 40n, payload), frames);
    assert.deepEqual(replayEndFrames('no-topic'), end);
  });

  test('anything else is a WireError', () => {
    for (const bad of [
      [Buffer.from('x'), seqBytes(1), payload],
      [Buffer.alloc(0), payload],
      [Buffer.alloc(0), Buffer.alloc(3), payload],
    ]) {
      assert.throws(() => readReplayReply(bad), { code: 'ERR_WIRE_DECODE' });
    }
  });
});

test('a raw dict batch with an unknown event type still decodes the rest', () => {
  // Producers add event types over time; a future one must not cost the known ones.
  const payload = encode([
    new PyFloat(1),
    [new PyDict([['type', 'BlockMoved']]), make(V026.AllBlocksCleared)],
    0,
  ]);
  const decoded = decodeEventBatch(payload);
  assert.equal(decoded.skippedEvents, 1);
  assert.deepEqual(decoded.events, [{ type: 'AllBlocksCleared' }]);
});
