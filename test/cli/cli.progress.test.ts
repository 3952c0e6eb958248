/**
 * Progress of long commands: the shared module's bar and lines (`src/cli/progress.ts`), and
 * `kvroute sim` off a TTY writing status lines to stderr (the period shortened through
 * KVROUTE_PROGRESS_MS), silenced by --quiet.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { duration, Progress, PROGRESS_INTERVAL_ENV } from '../../src/cli/progress.ts';
import { runCli } from '../support/cli.ts';

/** A stream that keeps what is written, and a clock the test moves. */
function harness(isTTY: boolean, quiet = false) {
  const written: string[] = [];
  let nowMs = 0;
  const progress = new Progress({
    command: 'kvroute test',
    quiet,
    stream: { isTTY, write: (text: string) => written.push(text) },
    lineIntervalMs: 10_000,
    now: () => nowMs,
  });
  return { progress, written, advance: (ms: number) => (nowMs += ms) };
}

describe('Progress', () => {
  test('off a TTY: a line every interval with what is done, what runs, an estimate', () => {
    const { progress, written, advance } = harness(false);
    progress.phase('runs', { total: 4, unit: 'runs', of: 'simulated time' });
    const first = progress.task('cost x 22');
    advance(5_000);
    first.update(0.5);
    assert.equal(written.length, 0, 'nothing before the first interval');
    advance(5_000);
    first.update(1);
    first.end();
    const second = progress.task('random x 22');
    second.update(0);
    assert.deepEqual(written, [
      'kvroute test: runs: 0/4 runs, cost x 22 100 % of simulated time, ~30 s left\n',
    ]);
    advance(10_000);
    second.update(0.25);
    // 1.25 of 4 runs in 20 s: 44 s more.
    assert.equal(
      written[1],
      'kvroute test: runs: 1/4 runs, random x 22 25 % of simulated time, ~44 s left\n',
    );
  });

  test('tasks from several sources at once (parallel workers), total unknown', () => {
    const { progress, advance } = harness(false);
    progress.phase('search delay-cost', { unit: 'probes', of: 'simulated time' });
    const a = progress.task('14 replicas');
    const b = progress.task('18 replicas');
    advance(60_000);
    a.update(0.5);
    b.update(0.2);
    assert.equal(
      progress.status(),
      'search delay-cost: 2 running, 35 % of simulated time on average, ~4 min left for the current ones',
    );
    a.end();
    b.update(0.4, 'early stop likely');
    assert.equal(
      progress.status(),
      'search delay-cost: 1 probes done, 18 replicas 40 % of simulated time (early stop likely), ~2 min left for the current one',
    );
  });

  test('a search phase: its estimated total and detail revised as probes end, counts kept', () => {
    const { progress, advance } = harness(false);
    progress.phase('search', { unit: 'probes', of: 'simulated time' });
    progress.revise({ total: 6, estimated: true, detail: 'policy 1/2' }, 'search cost');
    const a = progress.task('22 replicas');
    advance(10_000);
    a.update(1);
    a.end();
    progress.revise({ total: 5, estimated: true });
    const b = progress.task('44 replicas');
    b.update(0);
    // 1 of ~5 probes in 10 s: 40 s more.
    assert.equal(
      progress.status(),
      'search cost: policy 1/2, 1/~5 probes, 44 replicas 0 % of simulated time, ~40 s left',
    );
    progress.revise({ total: 4, detail: 'policy 2/2' }, 'search random');
    assert.match(progress.status(), /^search random: policy 2\/2, 1\/~4 probes, /);
  });

  test('on a TTY: one bar, redrawn in place after the first second, cleared at the end', () => {
    const { progress, written, advance } = harness(true);
    progress.phase('bench', { of: 'requests' });
    const t = progress.task('seed');
    t.update(0.1);
    assert.equal(written.length, 0, 'no bar in the first second');
    advance(2_000);
    t.update(0.5, 'sent 10');
    assert.match(
      written[0]!,
      /^\r\[#{15}\.{15}\] {2}50 % bench: seed 50 % of requests \(sent 10\)/,
    );
    progress.record('a measurement');
    assert.equal(written.length, 1, 'records show in the bar, not as lines, on a TTY');
    progress.done();
    assert.equal(written.at(-1), '\r\x1b[K');
  });

  test('--quiet: nothing at all', () => {
    const { progress, written, advance } = harness(false, true);
    const t = progress.task('x');
    advance(60_000);
    t.update(0.5);
    progress.record('line');
    progress.done();
    assert.deepEqual(written, []);
  });

  test('durations read in seconds, minutes, hours', () => {
    assert.equal(duration(400), '1 s');
    assert.equal(duration(42_000), '42 s');
    assert.equal(duration(180_000), '3 min');
    assert.equal(duration(2 * 3600_000), '2.0 h');
  });
});

describe('kvroute sim off a TTY', () => {
  const args = ['sim', '--workload', 'groups', '--policy', 'cost,random', '--replicas', '2'];
  const env = { [PROGRESS_INTERVAL_ENV]: '1' };

  test('prints progress lines to stderr; stdout keeps only the results', () => {
    const out = runCli(
      [...args, '--duration', '60', '--search', '--max-replicas', '4', '--threads', '1'],
      120_000,
      env,
    );
    assert.equal(out.status, 0, out.stderr);
    const lines = out.stderr.trim().split('\n');
    assert.ok(lines.length >= 2, out.stderr);
    for (const line of lines) assert.match(line, /^kvroute sim: (runs|search \S+): /);
    assert.ok(
      lines.some((l) =>
        /^kvroute sim: runs: [01]\/2 runs, \S+ x 2 \d+ % of simulated time/.test(l),
      ),
      out.stderr,
    );
    assert.ok(
      lines.some((l) => /^kvroute sim: search cost: .*replicas \d+ % of simulated time/.test(l)),
      out.stderr,
    );
    // What is done of what: the policy searched, probes done of those expected.
    assert.ok(
      lines.some((l) => /^kvroute sim: search cost: policy 1\/2, \d+\/~\d+ probes, /.test(l)),
      out.stderr,
    );
    assert.ok(
      lines.some((l) => /^kvroute sim: search random: policy 2\/2, \d+\/~\d+ probes, /.test(l)),
      out.stderr,
    );
    assert.doesNotMatch(out.stdout, /kvroute sim:/);
  });

  test('on worker threads: the simulations running and done', () => {
    const out = runCli(
      [...args, '--duration', '60', '--search', '--max-replicas', '4', '--threads', '2'],
      120_000,
      env,
    );
    assert.equal(out.status, 0, out.stderr);
    const lines = out.stderr.trim().split('\n');
    for (const line of lines) {
      assert.match(line, /^kvroute sim: runs and searches on 2 threads: /);
    }
    assert.ok(
      // Which of them, or how many, run at that moment depends on the machine's speed.
      lines.some((l) => /(cost|random) x \d|\d+ running, /.test(l)),
      out.stderr,
    );
    // Runs and policies done of all, simulations done of those expected.
    for (const line of lines) {
      assert.match(line, /: runs \d\/2, policies \d\/2 searched, \d+\/~\d+ simulations/);
    }
    // The workers' fractions reach the line: not stuck at 0 % while they run.
    assert.ok(
      lines.some((l) => /(running|x \d+), [1-9]\d* % of simulated time/.test(l)),
      out.stderr,
    );
    assert.doesNotMatch(out.stdout, /kvroute sim:/);
  });

  test('--quiet silences them', () => {
    const out = runCli([...args, '--duration', '60', '--quiet'], 300_000, env);
    assert.equal(out.status, 0, out.stderr);
    assert.equal(out.stderr, '');
  });
});
