/** The cluster's count: the highest of this planner's and its live peers'; stale or gone peers drop out. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PeerCounts } from '../../src/planner/online/peerCounts.ts';

test('the highest of its own and the live peers’ counts', () => {
  const c = new PeerCounts(90_000);
  assert.equal(c.fleet(null, 0), null, 'nothing known');
  assert.equal(c.fleet(3, 0), 3);
  c.set('a', 5, 1_000);
  c.set('b', 2, 2_000);
  assert.equal(c.fleet(3, 2_000), 5);
  assert.equal(c.fleet(null, 2_000), 5, 'a joiner with no answer yet exports its peers’');
  c.set('a', 1, 3_000);
  assert.equal(c.fleet(3, 3_000), 3, 'a peer’s newer count replaces its older one');
  assert.deepEqual(
    c.live(3_000).map((x) => [x.peer, x.desiredReplicas]),
    [
      ['a', 1],
      ['b', 2],
    ],
  );
});

test('a count older than staleMs, or of a peer that left, no longer counts', () => {
  const c = new PeerCounts(90_000);
  c.set('a', 8, 0);
  c.set('b', 6, 50_000);
  assert.equal(c.fleet(2, 90_000), 8);
  assert.equal(c.fleet(2, 90_001), 6, 'a is stale');
  c.drop('b');
  assert.equal(c.fleet(2, 90_001), 2);
  assert.deepEqual(c.live(90_001), []);
  assert.throws(() => new PeerCounts(0), RangeError);
});
