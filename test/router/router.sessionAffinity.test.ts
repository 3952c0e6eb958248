/** Session affinity: the bounded LRU of sessions, and the router keeping a session within slack. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Router, SessionMap } from '../../src/router/index.ts';
import { request, tokens } from '../support/routing.ts';

describe('SessionMap: a bounded LRU without a clock', () => {
  test('holds at most its capacity; the least recently used leaves first', () => {
    const map = new SessionMap({ capacity: 2 });
    map.record('a', 'r0');
    map.record('b', 'r1');
    assert.equal(map.replicaOf('a'), 'r0');
    map.record('a', 'r0'); // a is now the most recent
    map.record('c', 'r2');
    assert.equal(map.size, 2);
    assert.equal(map.replicaOf('b'), undefined, 'b was the least recent');
    assert.equal(map.replicaOf('a'), 'r0');
    assert.equal(map.replicaOf('c'), 'r2');
  });

  test('a session unused for more than idleRoutes recorded routes is forgotten', () => {
    const map = new SessionMap({ capacity: 100, idleRoutes: 2 });
    map.record('old', 'r0');
    map.record('x', 'r1');
    map.record('y', 'r1');
    assert.equal(map.replicaOf('old'), 'r0', 'two routes since: still held');
    map.record('z', 'r1');
    assert.equal(map.replicaOf('old'), undefined, 'three routes since: forgotten');
    assert.equal(map.size, 3, 'x (two routes old), y and z stay');
  });

  test('a record moves the session to its latest replica', () => {
    const map = new SessionMap();
    map.record('s', 'r0');
    map.record('s', 'r1');
    assert.equal(map.replicaOf('s'), 'r1');
    assert.equal(map.size, 1);
  });

  test('rejects a capacity or idle bound below 1', () => {
    assert.throws(() => new SessionMap({ capacity: 0 }), RangeError);
    assert.throws(() => new SessionMap({ idleRoutes: 0 }), RangeError);
  });

  test('property: never over capacity, and the last `capacity` distinct keys are all held', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 200 }),
        (capacity, keys) => {
          const map = new SessionMap({ capacity });
          for (const k of keys) {
            map.record(`s${k}`, `r${k % 3}`);
            assert.ok(map.size <= capacity);
          }
          const recent: number[] = [];
          for (let i = keys.length - 1; i >= 0 && recent.length < capacity; i--) {
            if (!recent.includes(keys[i]!)) recent.push(keys[i]!);
          }
          for (const k of recent) assert.equal(map.replicaOf(`s${k}`), `r${k % 3}`);
        },
      ),
    );
  });
});

describe('Router: a session stays on its replica while the cost rule allows', () => {
  const PROMPT = 100;
  const SLACK = 1_000;
  const turn = (id: string, session: string | undefined, seed: number, count = PROMPT) => ({
    ...request(id, tokens(seed, count)),
    ...(session !== undefined && { session }),
  });

  test('kept within slack, left when too costly, left when its replica is down', () => {
    const router = new Router({
      replicas: ['a', 'b'],
      policy: 'cost',
      seed: 3,
      sessions: { slackTokens: SLACK },
    });
    const first = router.route(turn('t1', 's', 1), 0);
    assert.equal(first.affinity, 'new');
    const home = first.replica;
    const other = home === 'a' ? 'b' : 'a';
    router.onFinished('t1', 1);

    // Load home with 500 queued tokens: 500 more than the other, within the slack of 1,000.
    router.route({ ...turn('load1', undefined, 50, 500), avoid: [other] }, 2);
    const second = router.route(turn('t2', 's', 2), 3);
    assert.equal(second.replica, home);
    assert.equal(second.affinity, 'kept');
    router.onFinished('t2', 4);

    // A request without a session under the same load goes to the cheaper replica.
    const free = router.route(turn('free', undefined, 60), 4);
    assert.equal(free.replica, other);
    assert.equal(free.affinity, undefined);
    router.onFinished('free', 4);

    // 1,500 tokens more than the other: past the slack, the session moves.
    router.route({ ...turn('load2', undefined, 51, 1_000), avoid: [other] }, 5);
    const third = router.route(turn('t3', 's', 3), 6);
    assert.equal(third.replica, other);
    assert.equal(third.affinity, 'left');
    router.onFinished('t3', 7);

    // It now sticks to its new replica; and when that one goes down it returns to home.
    const fourth = router.route(turn('t4', 's', 4), 8);
    assert.equal(fourth.replica, other);
    assert.equal(fourth.affinity, 'kept');
    router.onFinished('t4', 8);
    router.markDown(other);
    const fifth = router.route(turn('t5', 's', 5), 9);
    assert.equal(fifth.replica, home);
    assert.equal(fifth.affinity, 'left');
  });

  test('an avoided or removed replica is left; without affinity options keys are ignored', () => {
    const router = new Router({
      replicas: ['a', 'b'],
      policy: 'cost',
      seed: 5,
      sessions: { slackTokens: SLACK },
    });
    const home = router.route(turn('t1', 's', 1), 0).replica;
    const other = home === 'a' ? 'b' : 'a';
    router.onFinished('t1', 0);
    const avoided = router.route({ ...turn('t2', 's', 2), avoid: [home] }, 1);
    assert.equal(avoided.replica, other);
    assert.equal(avoided.affinity, 'left');
    router.onFinished('t2', 1);
    router.removeReplica(other);
    const back = router.route(turn('t3', 's', 3), 2);
    assert.equal(back.replica, home);
    assert.equal(back.affinity, 'left');

    const plain = new Router({ replicas: ['a', 'b'], policy: 'cost', seed: 5 });
    assert.equal(plain.route(turn('t1', 's', 1), 0).affinity, undefined);
  });

  test('with the default policy a session sticks while idle replicas tie', () => {
    const router = new Router({
      replicas: ['a', 'b', 'c'],
      seed: 11,
      sessions: { slackTokens: 0 },
    });
    const home = router.route(turn('t0', 's', 0), 0).replica;
    router.onFinished('t0', 0);
    for (let i = 1; i < 20; i++) {
      const d = router.route(turn(`t${i}`, 's', i), i);
      assert.equal(d.replica, home);
      assert.equal(d.affinity, 'kept');
      router.onFinished(`t${i}`, i);
    }
  });

  test('a negative slack is refused', () => {
    assert.throws(() => new Router({ replicas: ['a'], sessions: { slackTokens: -1 } }));
  });
});
