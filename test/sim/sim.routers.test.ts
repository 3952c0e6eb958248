/**
 * Several routers over one simulated fleet (`kvroute sim --routers N --sync-ms D | --sync none`):
 * records reach the other routers D ms later on the virtual clock; none without sync.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Router } from '../../src/router/index.ts';
import { MultiRouter } from '../../src/sim/multiRouter.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { simulate } from '../../src/sim/run.ts';
import { renderReport } from '../../src/results/report.ts';
import { request, tokens } from '../support/routing.ts';

const NAMES = ['r0', 'r1', 'r2'];

function pair(syncMs: number | null): { routers: Router[]; multi: MultiRouter } {
  const routers = [0, 1].map((seed) => new Router({ replicas: NAMES, seed }));
  return { routers, multi: new MultiRouter(routers, NAMES, { syncMs, wantsEvents: true }) };
}

const queuedOn = (router: Router): number[] =>
  router.snapshot().replicas.map((r) => r.queuedPromptTokens);

function simRequest(id: string, n: number) {
  const r = request(id, tokens(n, 800));
  return { ...r, customer: 0 };
}

describe('MultiRouter', () => {
  test('a decision reaches the other router syncMs later, its release too', () => {
    const { routers, multi } = pair(5);
    const seen = (r: Router) => r.inFlight().map((x) => [x.peer, x.requestId, x.decoding]);
    const d = multi.route(simRequest('a', 1), 0)!;
    assert.equal(queuedOn(routers[0]!)[d.replicaId], 800, 'router 0 routed it');
    // Router 1 takes the next arrival at 4 ms: the record is not due yet.
    multi.route(simRequest('b', 2), 4);
    assert.deepEqual(seen(routers[1]!), [[null, 'b', false]]);
    multi.onFirstToken('a', 5);
    assert.deepEqual(seen(routers[1]!), [
      [null, 'b', false],
      ['g0', 'a', false],
    ]);
    multi.route(simRequest('c', 3), 9);
    assert.deepEqual(seen(routers[0]!), [
      [null, 'a', true],
      [null, 'c', false],
      ['g1', 'b', false],
    ]);
    multi.onFinished('a', 10);
    assert.deepEqual(seen(routers[1]!), [
      [null, 'b', false],
      ['g0', 'a', true],
    ]);
    multi.route(simRequest('d', 4), 15);
    assert.deepEqual(seen(routers[1]!), [
      [null, 'b', false],
      [null, 'd', false],
      ['g0', 'c', false],
    ]);
  });

  test('without sync each router sees only its own routes', () => {
    const { routers, multi } = pair(null);
    multi.route(simRequest('a', 1), 0);
    multi.route(simRequest('b', 2), 1_000);
    assert.deepEqual(routers[0]!.peers(), []);
    assert.deepEqual(routers[1]!.peers(), []);
    assert.equal(routers[1]!.inFlight().length, 1);
  });

  test('releases go to the router that routed the request', () => {
    const { routers, multi } = pair(0);
    multi.route(simRequest('a', 1), 0);
    multi.route(simRequest('b', 2), 0);
    multi.onFinished('b', 1);
    assert.deepEqual(
      routers[1]!.inFlight().map((r) => [r.peer, r.requestId]),
      [['g0', 'a']],
    );
    assert.deepEqual(
      routers[0]!.inFlight().map((r) => [r.peer, r.requestId]),
      [[null, 'a']],
    );
  });
});

describe('kvroute sim --routers', () => {
  const flags = (extra: string[]) => {
    const parsed = parseSimFlags([
      ...['--workload', 'hot', '--replicas', '6', '--rate', '10', '--duration', '40'],
      ...['--warmup', '5', '--policy', 'cost', ...extra],
    ]);
    assert.notEqual(parsed, 'help');
    return parsed as Exclude<typeof parsed, 'help'>;
  };
  const runOf = (extra: string[], at = 0) => {
    const parsed = flags(extra);
    const setup = parsed.setups?.[at];
    const policy = parsed.policies[0]!;
    return simulate({ ...parsed.base, router: { ...parsed.base.router, policy, ...setup } });
  };

  test('the flags: counts by delays, one run for one router, none for no sharing', () => {
    assert.deepEqual(flags(['--routers', '1,4', '--sync-ms', '1,none']).setups, [
      { routers: 1, syncMs: null },
      { routers: 4, syncMs: 1 },
      { routers: 4, syncMs: null },
    ]);
    assert.deepEqual(flags(['--routers', '2', '--sync', 'none']).setups, [
      { routers: 2, syncMs: null },
    ]);
    assert.deepEqual(flags(['--routers', '3']).setups, [{ routers: 3, syncMs: 1 }]);
    assert.equal(flags([]).setups, null);
    assert.throws(() => flags(['--routers', '0']), /--routers takes router counts/);
    assert.throws(() => flags(['--sync-ms', '-1']), /--sync-ms takes delays/);
    assert.throws(() => flags(['--sync', 'all']), /--sync takes none/);
  });

  test('deterministic; one router gives the plain run; no sync loses what sync keeps', () => {
    const plain = runOf([]);
    const one = runOf(['--routers', '1']);
    const { gateways, ...rest } = one;
    assert.deepEqual(gateways, { routers: 1, syncMs: null });
    assert.deepEqual(rest, plain);
    const synced = runOf(['--routers', '4', '--sync-ms', '1']);
    assert.deepEqual(runOf(['--routers', '4', '--sync-ms', '1']), synced);
    const unsynced = runOf(['--routers', '4', '--sync', 'none']);
    assert.equal(synced.policy, 'cost/4 routers, sync 1 ms');
    assert.equal(unsynced.policy, 'cost/4 routers, no sync');
    assert.equal(synced.router.decisions, plain.router.decisions);
    // Each unsynced router sees a quarter of every queue: the hot owner looks idle too long.
    assert.ok(
      unsynced.ttftMs.p99 > synced.ttftMs.p99,
      `no sync p99 ${unsynced.ttftMs.p99} vs sync ${synced.ttftMs.p99}`,
    );
    const html = renderReport([one, synced, unsynced], [], { title: 't', command: 'c' });
    assert.match(html, /TTFT p99 \(ms\) by router setup/);
    assert.match(html, /4 routers, no sync/);
    assert.doesNotMatch(renderReport([plain], [], { title: 't', command: 'c' }), /router setup/);
    assert.ok(
      Math.abs(synced.ttftMs.p99 - plain.ttftMs.p99) <
        Math.abs(unsynced.ttftMs.p99 - plain.ttftMs.p99),
    );
  });
});
