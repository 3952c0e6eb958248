/**
 * CPU-tier KV events in vLLM's bytes. The expected bytes come from vLLM's struct definitions
 * (test/support/msgspec.ts, transcribed from vllm/distributed/kv_events.py) filled in as
 * OffloadingConnectorScheduler.take_events fills them: `BlockStored(block_hashes,
 * parent_block_hash=None, token_ids=[], lora_id=None, block_size, medium="CPU",
 * lora_name=None)` and `BlockRemoved(block_hashes, medium="CPU")`, medium being
 * `CPULoadStoreSpec.medium()` (vllm/v1/kv_offload/mediums.py). The router reads them through the
 * gateway's decoder and hash map and holds the blocks in the replica's CPU tier.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { computeBlockKeys, toWireHash } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { decodeEventBatch, encodeEventBatch } from '../../src/kv/wire.ts';
import { type ForeignKvEvent, Router } from '../../src/router/index.ts';
import { encode, make, type Py, PyFloat, readBatch, V025, V026 } from '../support/msgspec.ts';
import { BLOCK, tokens as tokenStream } from '../support/routing.ts';

const batch = (era: typeof V025 | typeof V026, events: Py[]): Buffer =>
  encode(make(era.EventBatch, { ts: new PyFloat(2.5), events, data_parallel_rank: 0 }));

const toks = tokenStream(7, 48, 5, 120_000);
const keys = computeBlockKeys(toks, BLOCK);
const hashes = keys.map(toWireHash);

/** The connector's store and removal, as take_events builds them. */
const cpuStored = (era: typeof V025 | typeof V026, h: Py) =>
  make(era.BlockStored, {
    block_hashes: h,
    parent_block_hash: null,
    token_ids: [],
    block_size: BLOCK,
    lora_id: null,
    medium: 'CPU',
    lora_name: null,
  });
const cpuRemoved = (era: typeof V025 | typeof V026, h: Py) =>
  make(era.BlockRemoved, { block_hashes: h, medium: 'CPU' });

const ours: KvEvent[] = [
  {
    type: 'BlockStored',
    blockKeys: keys.slice(1),
    parentKey: null,
    tokenIds: [],
    blockSize: BLOCK,
    loraName: null,
    cacheSalt: null,
    medium: 'CPU',
  },
  { type: 'BlockRemoved', blockKeys: [keys[2]!], medium: 'CPU' },
];

describe("CPU-medium events are vLLM's OffloadingConnector bytes", () => {
  test('map form (vLLM >= 0.26): defaults omitted, no group_idx on either', () => {
    const expected = batch(V026, [
      cpuStored(V026, hashes.slice(1)),
      cpuRemoved(V026, [hashes[2]!]),
    ]);
    const got = encodeEventBatch(ours, { tsS: 2.5, dpRank: 0, format: 'map' });
    assert.equal(got.toString('hex'), expected.toString('hex'));
    // And read back strictly by the definitions: medium in its declared place.
    const read = readBatch(V026, got);
    assert.equal(read.events[0]!.fields.medium, 'CPU');
    assert.deepEqual(read.events[0]!.fields.token_ids, []);
    assert.equal(read.events[1]!.fields.medium, 'CPU');
    assert.equal(read.events[1]!.fields.group_idx, null);
  });

  test('array form (array_like vLLM): medium the 6th field of BlockStored, 2nd of BlockRemoved', () => {
    const expected = batch(V025, [
      cpuStored(V025, hashes.slice(1)),
      cpuRemoved(V025, [hashes[2]!]),
    ]);
    const got = encodeEventBatch(ours, { tsS: 2.5, dpRank: 0, format: 'array' });
    assert.equal(got.toString('hex'), expected.toString('hex'));
    const raw = readBatch(V025, got);
    assert.equal(raw.events[0]!.fields.medium, 'CPU');
  });

  test('the BlockStored bytes by hand: 8 entries, medium "CPU" after lora_id', () => {
    const one = batch(V026, [cpuStored(V026, [hashes[0]!])]);
    const hash = hashes[0]!.toString(16).padStart(16, '0');
    const hex = [
      '93cb4004000000000000', // [ts = 2.5,
      '91', // [one event
      '88', // map of 8: the tag and 7 fields
      'a474797065ab426c6f636b53746f726564', // "type": "BlockStored"
      `ac626c6f636b5f68617368657391cf${hash}`, // block_hashes: [uint64]
      'b1706172656e745f626c6f636b5f68617368c0', // parent_block_hash: None
      'a9746f6b656e5f69647390', // token_ids: []
      'aa626c6f636b5f73697a6510', // block_size: 16
      'a76c6f72615f6964c0', // lora_id: None
      'a66d656469756da3435055', // medium: "CPU"
      'a96c6f72615f6e616d65c0', // lora_name: None
      '00', // ], dp_rank 0]
    ].join('');
    assert.equal(one.toString('hex'), hex);
  });

  test('decoded: a tier store without token ids is not malformed', () => {
    for (const era of [V025, V026]) {
      const d = decodeEventBatch(
        batch(era, [cpuStored(era, hashes), cpuRemoved(era, [hashes[0]!])]),
      );
      assert.equal(d.malformedEvents, 0);
      assert.equal(d.events.length, 2);
      assert.equal(d.events[0]!.type === 'BlockStored' && d.events[0]!.medium, 'CPU');
      assert.equal(d.events[1]!.type === 'BlockRemoved' && d.events[1]!.medium, 'CPU');
    }
  });
});

describe('the router holds CPU-medium blocks in the replica CPU tier', () => {
  const gpuStored = make(V026.BlockStored, {
    block_hashes: hashes,
    parent_block_hash: null,
    token_ids: toks,
    block_size: BLOCK,
    lora_id: null,
    medium: 'GPU',
    lora_name: null,
    extra_keys: [null, null, null],
    group_idx: 0,
    kv_cache_spec_kind: 'full_attention',
  });
  const gpuRemoved = make(V026.BlockRemoved, { block_hashes: hashes, medium: 'GPU', group_idx: 0 });
  const feed = (router: Router, events: Py[]) =>
    router.applyForeignEvents(
      'a',
      decodeEventBatch(batch(V026, events)).events as ForeignKvEvent[],
      0,
    );
  const route = (router: Router) => {
    const d = router.route(
      { id: `q${Math.random()}`, blockKeys: keys, promptTokens: toks.length + 1, blockSize: BLOCK },
      0,
    );
    return d;
  };

  test('stored on the GPU, offloaded (hash only), evicted from the GPU: still a hit, on the CPU', () => {
    const router = new Router({ replicas: ['a', 'b'], policy: 'cost' });
    feed(router, [gpuStored, cpuStored(V026, hashes), gpuRemoved]);
    const snap = router.snapshot().replicas.find((r) => r.name === 'a')!;
    assert.deepEqual(snap.indexedBlocksByMedium, { GPU: 0, CPU: 3 });
    const d = route(router);
    assert.equal(d.replica, 'a');
    assert.equal(d.cachedTokens, 48);
  });

  test('removed from the CPU tier as well: a miss', () => {
    const router = new Router({ replicas: ['a'], policy: 'cost' });
    feed(router, [gpuStored, cpuStored(V026, hashes), gpuRemoved, cpuRemoved(V026, hashes)]);
    assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 0, CPU: 0 });
    assert.equal(route(router).cachedTokens, 0);
  });

  test('a CPU store of a hash never seen on the GPU resolves nothing', () => {
    const router = new Router({ replicas: ['a'], policy: 'cost' });
    feed(router, [cpuStored(V026, hashes)]);
    assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 0, CPU: 0 });
  });
});
