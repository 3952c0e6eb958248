/**
 * The owner tracker (src/sim/owners.ts): a replica owns a customer's prefix while its GPU pool
 * holds the prefix's last block. A CPU tier's copy of the block is not ownership: vLLM's
 * OffloadingConnector stores and removes it with `medium: "CPU"` events, which must leave the
 * GPU owner count as it is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BlockKey } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { OwnerTracker } from '../../src/sim/owners.ts';
import type { Workload } from '../../src/workload/types.ts';

const KEY_A = 1001 as BlockKey;
const KEY_B = 2002 as BlockKey;

/** Two customers whose prefixes end in KEY_A and KEY_B; customer 0 is watched. */
function workload(): Workload {
  return {
    name: 'owners-test',
    blockSize: 16,
    customers: 2,
    watchedCustomer: 0,
    arrivals: () => [][Symbol.iterator](),
    materialize: () => {
      throw new Error('not used');
    },
    prefixWatchKey: (c) => (c === 0 ? KEY_A : KEY_B),
  };
}

const stored = (keys: BlockKey[], medium?: 'CPU' | 'GPU'): KvEvent => ({
  type: 'BlockStored',
  blockKeys: keys,
  parentKey: null,
  tokenIds: [],
  blockSize: 16,
  loraName: null,
  cacheSalt: null,
  ...(medium ? { medium } : {}),
});
const removed = (keys: BlockKey[], medium?: 'CPU' | 'GPU'): KvEvent => ({
  type: 'BlockRemoved',
  blockKeys: keys,
  ...(medium ? { medium } : {}),
});

test('GPU stores and removals set ownership; the count follows the replicas', () => {
  const t = new OwnerTracker(workload(), 3);
  t.apply(0, [stored([KEY_A])]);
  t.apply(1, [stored([KEY_A, KEY_B], 'GPU')]);
  assert.equal(t.owners(0), 2);
  assert.equal(t.owners(1), 1);
  assert.deepEqual(t.ownedBy(1), [0, 1]);
  t.apply(0, [removed([KEY_A])]);
  assert.equal(t.owners(0), 1);
  t.apply(1, [{ type: 'AllBlocksCleared' }]);
  assert.equal(t.owners(0), 0);
  assert.equal(t.owners(1), 0);
});

test('a CPU-tier store does not make a replica an owner', () => {
  const t = new OwnerTracker(workload(), 2);
  t.apply(0, [stored([KEY_A], 'CPU')]);
  assert.equal(t.owners(0), 0);
  assert.deepEqual(t.ownedBy(0), []);
});

test('offloading an owned block keeps ownership until the GPU copy goes', () => {
  const t = new OwnerTracker(workload(), 2);
  t.apply(0, [stored([KEY_A])]);
  // The tier takes a copy, then evicts it: the GPU copy is still there.
  t.apply(0, [stored([KEY_A], 'CPU'), removed([KEY_A], 'CPU')]);
  assert.equal(t.owners(0), 1);
  // The GPU evicts its copy while the tier holds one: no longer an owner.
  t.apply(0, [stored([KEY_A], 'CPU'), removed([KEY_A])]);
  assert.equal(t.owners(0), 0);
});

test('samples follow the watched customer and the mean over all', () => {
  const t = new OwnerTracker(workload(), 2);
  t.apply(0, [stored([KEY_A, KEY_B])]);
  t.apply(1, [stored([KEY_A]), stored([KEY_B], 'CPU')]);
  t.sample();
  assert.deepEqual(t.watchedSeries, [2]);
  assert.deepEqual(t.meanSeries, [1.5]);
});
