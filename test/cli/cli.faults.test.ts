/**
 * `--kill R@S` / `--revive R@S` checked against the run: a replica that does not exist, a time
 * after the arrivals end (the duration, or a trace's last arrival), a revival with no kill
 * before it, and a second kill of a dead replica are refused with one line naming the flag and
 * the accepted range (exit 2); faults that fit the run are kept as given.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { ROOT, runCli } from '../support/cli.ts';

const TRACE = join(ROOT, 'test/fixtures/digest-trace.jsonl');

function refused(argv: string[], message: RegExp): void {
  assert.throws(
    () => parseSimFlags(argv),
    (err: unknown) =>
      err instanceof UsageError && message.test(err.message) && !err.message.includes('\n'),
    `${argv.join(' ')} should fail with ${message}`,
  );
}

test('kvroute sim refuses a kill after the run on the command line, exit 2, one line', () => {
  const out = runCli(['sim', '--replicas', '22', '--duration', '300', '--kill', '3@999']);
  assert.equal(out.status, 2, out.stderr);
  assert.equal(
    out.stderr,
    "kvroute sim: --kill 3@999: 999 s is after the run's arrivals end (300 s, --duration); give a time from 0 to 300 s\n",
  );
  assert.equal(out.stdout, '');
});

test('a replica beyond --replicas is refused, naming the flag and the range', () => {
  const out = runCli(['sim', '--replicas', '22', '--kill', '30@10']);
  assert.equal(out.status, 2, out.stderr);
  assert.equal(
    out.stderr,
    'kvroute sim: --kill 30@10: replica 30 does not exist; --replicas 22 gives replicas 0 to 21\n',
  );
  refused(
    ['--replicas', '4', '--kill', '1@10', '--revive', '4@20'],
    /^--revive 4@20: replica 4 does not exist; --replicas 4 gives replicas 0 to 3$/,
  );
});

test('times: within --duration (its default too) or a trace last arrival', () => {
  refused(
    ['--revive', '2@601', '--kill', '2@1'],
    /^--revive 2@601: .*\(600 s, the default --duration\); give a time from 0 to 600 s$/,
  );
  refused(
    ['--duration', '60', '--kill', '0@60.5'],
    /^--kill 0@60\.5: 60\.5 s is after .*\(60 s, --duration\)/,
  );
  refused(
    ['--trace', TRACE, '--replicas', '3', '--kill', '1@30'],
    /^--kill 1@30: 30 s is after the run's arrivals end \(29\.241 s, the trace's last arrival\); give a time from 0 to 29\.241 s$/,
  );
  // A --duration longer than the trace: the trace's end still decides.
  refused(
    ['--trace', TRACE, '--replicas', '3', '--duration', '100', '--kill', '1@50'],
    /the trace's last arrival/,
  );
  const inTrace = parseSimFlags(['--trace', TRACE, '--replicas', '3', '--kill', '1@29']);
  assert.ok(inTrace !== 'help');
  assert.deepEqual(inTrace.base.faults, [{ kind: 'kill', replica: 1, atMs: 29_000 }]);
  const atEnd = parseSimFlags(['--duration', '60', '--kill', '0@60']);
  assert.ok(atEnd !== 'help');
  assert.equal(atEnd.base.faults.length, 1);
});

test('a revival needs an earlier kill of that replica; a dead replica is not killed twice', () => {
  refused(
    ['--revive', '3@10'],
    /^--revive 3@10: replica 3 is not down before 10 s; a revival needs an earlier --kill 3@S$/,
  );
  refused(
    ['--kill', '3@20', '--revive', '3@10'],
    /^--revive 3@10: replica 3 is not down before 10 s/,
  );
  refused(
    ['--kill', '3@20', '--revive', '3@20'],
    /^--revive 3@20: replica 3 is not down before 20 s/,
  );
  refused(['--kill', '2@10', '--revive', '3@20'], /^--revive 3@20: /);
  refused(
    ['--kill', '3@20', '--kill', '3@30'],
    /^--kill 3@30: replica 3 is already down then \(killed at 20 s\)/,
  );
  refused(
    ['--kill', '3@20', '--revive', '3@30', '--revive', '3@40'],
    /^--revive 3@40: replica 3 is not down/,
  );
  const ok = parseSimFlags([
    '--kill',
    '3@50',
    '--revive',
    '3@30',
    '--kill',
    '3@10',
    '--revive',
    '3@60',
  ]);
  assert.ok(ok !== 'help');
  assert.deepEqual(ok.base.faults, [
    { kind: 'kill', replica: 3, atMs: 50_000 },
    { kind: 'kill', replica: 3, atMs: 10_000 },
    { kind: 'revive', replica: 3, atMs: 30_000 },
    { kind: 'revive', replica: 3, atMs: 60_000 },
  ]);
});
