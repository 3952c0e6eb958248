/**
 * Where a P/D leg is routed with flow control on (`src/gateway/pd/legRoute.ts`): the prefill
 * leg's first attempt goes onto the replica the pass names when it can prefill, later attempts
 * and a pass naming a decode-only replica route as any other (among the replicas with room),
 * and the router's own exclusions (the decode pool, replicas tried) always hold. And owner
 * release's view of a P/D pool is its prefill-capable replicas (`prefillView`). The pool is a
 * stand-in whose router picks the first replica left and records what it was asked to avoid.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { prefillOnto, routeLeg } from '../../src/gateway/pd/legRoute.ts';
import { RouterError, type RouteRequest } from '../../src/router/index.ts';
import { type FlowControl, prefillView } from '../../src/serving/flowControl.ts';
import type { BackendRole } from '../../src/serving/pdRoles.ts';
import type { ModelPool, PoolRoute } from '../../src/serving/pool.ts';

const ROLES: Record<string, BackendRole> = { p0: 'prefill', p1: 'prefill', b: 'both', d: 'decode' };

/** A pool of `ROLES`' replicas whose router takes the first one not avoided. */
function standInPool(): { pool: ModelPool; asked: RouteRequest[] } {
  const names = Object.keys(ROLES);
  const asked: RouteRequest[] = [];
  const pool = {
    names,
    backendOf: (name: string) =>
      ROLES[name] === undefined ? undefined : { name, config: { role: ROLES[name] } },
    route(request: RouteRequest): PoolRoute {
      asked.push(request);
      const name = names.find((n) => !(request.avoid ?? []).includes(n));
      if (name === undefined) throw new RouterError('ERR_NO_HEALTHY_REPLICA', 'none left');
      return { backend: { name }, decision: { replica: name, cachedTokens: 0 } } as PoolRoute;
    },
  };
  return { pool: pool as unknown as ModelPool, asked };
}

/** Flow control's avoid list: all but the pass's replica, else those without room (`roomless`). */
function standInFlow(pool: ModelPool, roomless: string[]): FlowControl {
  return {
    avoidFor: (_: ModelPool, onto: string | null) =>
      onto === null ? roomless : pool.names.filter((n) => n !== onto),
  } as unknown as FlowControl;
}

const leg = {
  parsed: { blockKeys: [], promptTokens: 64 },
  blockSize: 16,
  tenant: null,
  adapter: null,
};
const notPrefill = (pool: ModelPool, tried: string[]) => (n: string) =>
  tried.includes(n) || pool.backendOf(n)?.config.role === 'decode';

describe('P/D legs with flow control', () => {
  test("the prefill leg's first attempt goes onto the pass's replica, not the router's first pick", () => {
    const { pool } = standInPool();
    const flow = standInFlow(pool, []);
    const onto = prefillOnto(pool, 'b', 0);
    assert.equal(onto, 'b');
    const route = routeLeg(pool, leg, 'r:p0', notPrefill(pool, []), flow, onto);
    assert.equal(route?.backend.name, 'b');
    // Without the pass the same router takes its first pick.
    assert.equal(routeLeg(pool, leg, 'r:p0', notPrefill(pool, []), flow)?.backend.name, 'p0');
  });

  test('a retry, and a pass naming a decode-only replica, route among those with room', () => {
    const { pool, asked } = standInPool();
    const flow = standInFlow(pool, ['p0']);
    assert.equal(prefillOnto(pool, 'p1', 1), null);
    assert.equal(prefillOnto(pool, 'd', 0), null);
    assert.equal(prefillOnto(pool, null, 0), null);
    const route = routeLeg(
      pool,
      leg,
      'r:p1',
      notPrefill(pool, []),
      flow,
      prefillOnto(pool, 'd', 0),
    );
    assert.equal(route?.backend.name, 'p1', 'p0 has no room');
    assert.deepEqual(asked.at(-1)?.avoid, ['d', 'p0']);
  });

  test("the leg's exclusions hold: a pass onto a replica already tried falls back to the router", () => {
    const { pool, asked } = standInPool();
    const flow = standInFlow(pool, []);
    const route = routeLeg(pool, leg, 'r:p1', notPrefill(pool, ['p0']), flow, 'p0');
    assert.equal(route?.backend.name, 'p1');
    // First asked with everything avoided (refused), then with the leg's own exclusions only.
    assert.equal(asked.length, 2);
    assert.deepEqual(asked[1]?.avoid, ['p0', 'd']);
    // Every replica that may prefill tried: no route (the decode leg then computes the prompt).
    assert.equal(routeLeg(pool, leg, 'r:p3', notPrefill(pool, ['p0', 'p1', 'b']), flow), null);
  });

  test('without flow control (the decode leg), the router is asked with the exclusions alone', () => {
    const { pool, asked } = standInPool();
    const route = routeLeg(pool, leg, 'r:d', (n) => n !== 'd');
    assert.equal(route?.backend.name, 'd');
    assert.deepEqual(asked, [
      { id: 'r:d', blockKeys: [], promptTokens: 64, blockSize: 16, avoid: ['p0', 'p1', 'b'] },
    ]);
  });

  test("owner release's view of a P/D pool is its replicas that can prefill", () => {
    const { pool } = standInPool();
    const load = (q: number) => ({ eligible: true, queuedPromptTokens: q, queuedPrefillMs: q });
    const view = {
      replicas: [load(1), load(2), load(3), load(4)],
      names: ['p0', 'p1', 'b', 'd'],
      ids: [0, 1, 2, 3],
    };
    assert.deepEqual(prefillView(pool, view), {
      replicas: [load(1), load(2), load(3)],
      names: ['p0', 'p1', 'b'],
      ids: [0, 1, 2],
    });
    // A pool without decode-only replicas: the view as it is.
    const plain = { replicas: [load(1)], names: ['b'], ids: [2] };
    assert.equal(prefillView(pool, plain), plain);
  });
});
