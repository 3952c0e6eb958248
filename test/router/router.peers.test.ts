/**
 * Peer records in the router core: another router's assignments and releases, applied to this
 * router's ledger and overlay, keyed by (peer, request id), dropped whole when the peer leaves.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type InFlightRecord, type PeerRoute, Router } from '../../src/router/index.ts';
import { BLOCK, request, stored, tokens } from '../support/routing.ts';

const REPLICAS = ['a', 'b', 'c'];

function queued(router: Router): Record<string, number> {
  return Object.fromEntries(router.snapshot().replicas.map((r) => [r.name, r.queuedPromptTokens]));
}

function peerRoute(fields: Partial<PeerRoute> & Pick<PeerRoute, 'peer' | 'requestId'>): PeerRoute {
  return { replica: 'a', promptTokens: 800, uncachedTokens: 800, blockSize: BLOCK, ...fields };
}

describe('a peer router’s records', () => {
  test('a peer route raises the replica’s queue; its first token and its end lower it', () => {
    const router = new Router({ replicas: REPLICAS, seed: 1 });
    assert.equal(router.applyPeerRoute(peerRoute({ peer: 'p1', requestId: 'x' }), 0), true);
    assert.deepEqual(queued(router), { a: 800, b: 0, c: 0 });
    const a = router.snapshot().replicas[0]!;
    assert.equal(a.prefillRequests, 1);
    assert.equal(router.applyPeerRelease('p1', 'x', 'prefill'), true);
    assert.deepEqual(queued(router), { a: 0, b: 0, c: 0 });
    assert.equal(router.snapshot().replicas[0]!.decodeRequests, 1);
    assert.equal(router.applyPeerRelease('p1', 'x', 'done'), true);
    assert.equal(router.snapshot().replicas[0]!.inFlight, 0);
    assert.equal(router.applyPeerRelease('p1', 'x', 'done'), false, 'already ended');
  });

  test('the same request id from two peers and from this router are three entries', () => {
    const router = new Router({ replicas: REPLICAS, seed: 1 });
    router.route(request('x', tokens(1, 320)), 0);
    router.applyPeerRoute(peerRoute({ peer: 'p1', requestId: 'x', replica: 'b' }), 0);
    router.applyPeerRoute(peerRoute({ peer: 'p2', requestId: 'x', replica: 'b' }), 0);
    const total = Object.values(queued(router)).reduce((s, q) => s + q, 0);
    assert.equal(total, 320 + 800 + 800);
    router.applyPeerRelease('p1', 'x', 'done');
    assert.equal(queued(router).b, 800, 'p2’s entry stays');
    router.onFinished('x', 1);
    assert.equal(router.dropPeer('p2'), 1);
    assert.deepEqual(queued(router), { a: 0, b: 0, c: 0 });
  });

  test('the queue term sees the peers’ routes: a hot prefix spills as it would with one router', () => {
    const shared = tokens(7, 6_000);
    const hot = (i: number) => shared.concat(tokens(100 + i, 2_000));
    const solo = new Router({ replicas: ['a', 'b'], seed: 3 });
    const left = new Router({ replicas: ['a', 'b'], seed: 3 });
    const right = new Router({ replicas: ['a', 'b'], seed: 3 });
    for (const r of [solo, left, right]) r.applyEvents('a', [stored(shared)], 0);
    const soloPicks = [0, 1, 2, 3].map((i) => solo.route(request(`h${i}`, hot(i)), 1).replica);
    // Two routers alternate; each applies the other's decisions as peer records.
    const picks: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [mine, other] = i % 2 === 0 ? [left, right] : [right, left];
      const d = mine.route(request(`h${i}`, hot(i)), 1);
      picks.push(d.replica);
      other.applyPeerRoute(
        {
          peer: i % 2 === 0 ? 'left' : 'right',
          requestId: d.requestId,
          replica: d.replica,
          promptTokens: 8_000,
          uncachedTokens: d.uncachedTokens,
          blockSize: BLOCK,
        },
        1,
      );
    }
    assert.deepEqual(picks, soloPicks);
    assert.deepEqual(picks, ['a', 'a', 'a', 'b']);
  });

  test('a peer’s predicted prefix counts as cached (overlay) until it expires', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 5, overlayTtlMs: 1_000 });
    const prompt = tokens(11, 1_600);
    const keys = request('p', prompt).blockKeys;
    router.applyPeerRoute(
      peerRoute({
        peer: 'p1',
        requestId: 'r',
        replica: 'b',
        promptTokens: 1_600,
        uncachedTokens: 1_600,
        blockKeys: keys,
        fromBlock: 0,
      }),
      0,
    );
    router.applyPeerRelease('p1', 'r', 'done');
    const warm = router.route(request('q', prompt), 500);
    assert.equal(warm.replica, 'b');
    assert.equal(warm.cachedTokens, 1_600);
    router.onFinished('q', 500);
    const later = new Router({ replicas: ['a', 'b'], seed: 5, overlayTtlMs: 1_000 });
    later.applyPeerRoute(
      peerRoute({ peer: 'p1', requestId: 'r', replica: 'b', blockKeys: keys, fromBlock: 0 }),
      0,
    );
    later.applyPeerRelease('p1', 'r', 'done');
    assert.equal(later.route(request('q', prompt), 1_500).cachedTokens, 0, 'expired');
  });

  test('a prediction from the first uncached block on matches at its position', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 5 });
    const prompt = tokens(13, 1_600);
    const keys = request('p', prompt).blockKeys;
    // The peer found the first 50 blocks cached on 'b'; it predicts the other 50 there.
    router.applyEvents('b', [stored(prompt.slice(0, 800))], 0);
    router.applyPeerRoute(
      peerRoute({
        peer: 'p1',
        requestId: 'r',
        replica: 'b',
        promptTokens: 1_600,
        uncachedTokens: 800,
        blockKeys: keys.slice(50),
        fromBlock: 50,
      }),
      0,
    );
    router.applyPeerRelease('p1', 'r', 'done');
    assert.equal(router.route(request('q', prompt), 10).cachedTokens, 1_600);
  });

  test('approx mode records a peer’s route in the index', () => {
    const router = new Router({ replicas: ['a', 'b'], seed: 5, indexMode: 'approx' });
    const prompt = tokens(17, 640);
    const keys = request('p', prompt).blockKeys;
    router.applyPeerRoute(
      peerRoute({ peer: 'p1', requestId: 'r', replica: 'b', promptTokens: 640, blockKeys: keys }),
      0,
    );
    router.applyPeerRelease('p1', 'r', 'done');
    assert.equal(router.route(request('q', prompt), 10_000).replica, 'b');
  });

  test('a route to a replica this router does not have is refused, and nothing is counted', () => {
    const router = new Router({ replicas: REPLICAS, seed: 1 });
    assert.equal(
      router.applyPeerRoute(peerRoute({ peer: 'p', requestId: 'x', replica: 'z' }), 0),
      false,
    );
    assert.equal(router.applyPeerRelease('p', 'x', 'done'), false);
    assert.deepEqual(router.peers(), []);
  });

  test('inFlight lists own and peers’ entries; applied to another router, the loads agree', () => {
    const router = new Router({ replicas: REPLICAS, seed: 1 });
    router.route(request('own', tokens(3, 480)), 0);
    router.applyPeerRoute(peerRoute({ peer: 'p1', requestId: 'x', replica: 'c', lora: 'sql' }), 0);
    router.applyPeerRoute(peerRoute({ peer: 'p2', requestId: 'y', replica: 'b' }), 0);
    router.applyPeerRelease('p2', 'y', 'prefill');
    const records = router.inFlight();
    assert.deepEqual(
      records.map((r) => [r.peer, r.requestId, r.decoding]),
      [
        [null, 'own', false],
        ['p1', 'x', false],
        ['p2', 'y', true],
      ],
    );
    const joiner = new Router({ replicas: REPLICAS, seed: 1 });
    for (const r of records) joiner.applyPeerRoute({ ...r, peer: r.peer ?? 'responder' }, 0);
    const loads = (x: Router) =>
      x
        .snapshot()
        .replicas.map(
          ({
            queuedPromptTokens,
            prefillRequests,
            decodeRequests,
            activeDecodeBlocks,
            activePrefillBlocks,
          }) => ({
            queuedPromptTokens,
            prefillRequests,
            decodeRequests,
            activeDecodeBlocks,
            activePrefillBlocks,
          }),
        );
    assert.deepEqual(loads(joiner), loads(router));
    assert.deepEqual(joiner.snapshot().replicas[2]!.loraAdapters, ['sql']);
    assert.equal(joiner.dropPeer('p1'), 1);
    assert.deepEqual(joiner.snapshot().replicas[2]!.loraAdapters, []);
  });
});

/** One step of the property test: an own or a peer's route or release, or a peer dropped. */
type Op =
  | { kind: 'route'; peer: number; id: number; replica: number; uncached: number }
  | { kind: 'release'; peer: number; id: number; stage: 'prefill' | 'done' }
  | { kind: 'drop'; peer: number };

const PEERS = ['self', 'p1', 'p2', 'p3'];

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('route' as const),
    peer: fc.integer({ min: 0, max: 3 }),
    id: fc.integer({ min: 0, max: 5 }),
    replica: fc.integer({ min: 0, max: 2 }),
    uncached: fc.integer({ min: 0, max: 400 }),
  }),
  fc.record({
    kind: fc.constant('release' as const),
    peer: fc.integer({ min: 0, max: 3 }),
    id: fc.integer({ min: 0, max: 5 }),
    stage: fc.constantFrom('prefill' as const, 'done' as const),
  }),
  fc.record({ kind: fc.constant('drop' as const), peer: fc.integer({ min: 1, max: 3 }) }),
);

interface Truth {
  replica: number;
  uncached: number;
  prompt: number;
  decoding: boolean;
}

describe('property: the ledger’s totals are what is really in flight', () => {
  test('own and peer routes, releases and dropped peers, in any order', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 80 }), (ops) => {
        const router = new Router({ replicas: REPLICAS, seed: 1 });
        // What is really in flight, by "peer/id" (own entries under 'self').
        const truth = new Map<string, Truth>();
        for (const op of ops) {
          const peer = PEERS[op.peer]!;
          if (op.kind === 'route') {
            const prompt = 400;
            const uncached = Math.min(prompt, op.uncached);
            const id = `q${op.id}`;
            if (peer === 'self') {
              // Own routes go through route(): the policy picks; the truth follows its pick.
              const d = router.route(
                { id, blockKeys: [], promptTokens: prompt, blockSize: BLOCK },
                0,
              );
              truth.set(`${peer}/${id}`, {
                replica: d.replicaId,
                uncached: d.uncachedTokens,
                prompt,
                decoding: false,
              });
            } else {
              router.applyPeerRoute(
                {
                  peer,
                  requestId: id,
                  replica: REPLICAS[op.replica]!,
                  promptTokens: prompt,
                  uncachedTokens: uncached,
                  blockSize: BLOCK,
                },
                0,
              );
              truth.set(`${peer}/${id}`, {
                replica: op.replica,
                uncached,
                prompt,
                decoding: false,
              });
            }
          } else if (op.kind === 'release') {
            const key = `${peer}/q${op.id}`;
            const t = truth.get(key);
            const applied =
              peer === 'self'
                ? op.stage === 'prefill'
                  ? router.onFirstToken(`q${op.id}`, 0)
                  : router.onFinished(`q${op.id}`, 0)
                : router.applyPeerRelease(peer, `q${op.id}`, op.stage);
            const expected = t !== undefined && !(op.stage === 'prefill' && t.decoding);
            assert.equal(applied, expected);
            if (t && op.stage === 'prefill') t.decoding = true;
            if (t && op.stage === 'done') truth.delete(key);
          } else {
            const mine = [...truth.keys()].filter((k) => k.startsWith(`${peer}/`));
            assert.equal(router.dropPeer(peer), mine.length, 'drops exactly its entries');
            for (const k of mine) truth.delete(k);
          }
          const snap = router.snapshot().replicas;
          REPLICAS.forEach((_, r) => {
            const mine = [...truth.values()].filter((t) => t.replica === r);
            const s = snap[r]!;
            assert.equal(
              s.queuedPromptTokens,
              mine.filter((t) => !t.decoding).reduce((a, t) => a + t.uncached, 0),
            );
            assert.equal(s.prefillRequests, mine.filter((t) => !t.decoding).length);
            assert.equal(s.decodeRequests, mine.filter((t) => t.decoding).length);
            assert.equal(
              s.activeDecodeTokens,
              mine.filter((t) => t.decoding).reduce((a, t) => a + t.prompt, 0),
            );
          });
          const records: InFlightRecord[] = router.inFlight();
          assert.equal(records.length, truth.size);
        }
      }),
      { numRuns: 300 },
    );
  });
});
