/** Policy tuning options off their defaults change the decision where the source says they do. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { makePolicy, type PickInput, type ReplicaView } from '../src/router/index.ts';
import { Rng } from '../src/util/rng.ts';
import { BLOCK, replicaView } from './support/routing.ts';

const input = (candidates: ReplicaView[]): PickInput => ({
  request: { id: 'q', blockKeys: [1, 2, 3, 4], promptTokens: 4 * BLOCK, blockSize: BLOCK },
  nowMs: 0,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

test('aibrix: imbalanceRunning (default 16) decides when least-running overrides the match', () => {
  // r0 holds the whole prefix with 10 running, r1 nothing with 0: max - min = 10.
  const views = [
    replicaView(0, { inFlight: 10, cachedBlocks: 4, cachedTokens: 4 * BLOCK }),
    replicaView(1, { inFlight: 0 }),
  ];
  assert.equal(makePolicy('aibrix').pick(input(views)).replicaId, 0, '10 <= 16: the match wins');
  assert.equal(
    makePolicy('aibrix', { imbalanceRunning: 9 }).pick(input(views)).replicaId,
    1,
    '10 > 9: least running',
  );
  // stddevFactor: mean 5, sigma 5; the bound mean + f x sigma admits r0 (10) only for f >= 1.
  assert.equal(makePolicy('aibrix', { stddevFactor: 0.5 }).pick(input(views)).replicaId, 1);
  assert.equal(makePolicy('aibrix', { stddevFactor: 1 }).pick(input(views)).replicaId, 0);
});

test('chwbl: loadFactor bounds the owner at (total + 1) / n x factor', () => {
  const router = (loadFactor?: number) =>
    makePolicy('chwbl', loadFactor === undefined ? {} : { loadFactor });
  // Whichever replica the ring names first, give it 3 in flight and the other 0:
  // bound = (3 + 1) / 2 x f: 2.5 at 1.25 (default) sends the request on, 4 at 2 keeps it.
  const probe = router().pick(input([replicaView(0), replicaView(1)])).replicaId;
  const views = [0, 1].map((id) => replicaView(id, { inFlight: id === probe ? 3 : 0 }));
  assert.notEqual(router().pick(input(views)).replicaId, probe, '3 > 2.5: walks on');
  assert.equal(router(2).pick(input(views)).replicaId, probe, '3 <= 4: stays');
});
