/**
 * `kvroute sim --requests-out FILE.jsonl`: one line per request of every run, warm-up and
 * failures included, whose measured lines give back the run's own figures (TTFT percentiles,
 * hit rate, errors by kind); asking for the file leaves the printed results as they were.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { summarize } from '../../src/results/stats.ts';
import type { RequestRecord } from '../../src/results/requestRecord.ts';
import { runCli } from '../support/cli.ts';
import { REQUEST_LINE_KEYS } from '../support/sim.ts';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-requests-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A line as the simulator writes it: its replica an index, its policy a name. */
type Line = RequestRecord & { policy: string; replica: number | null };

interface Result {
  policy: string;
  replicas: number;
  warmupS: number;
  arrived: number;
  completed: number;
  errorsByKind: Record<string, number>;
  ttftMs: { p50: number; p99: number; count: number };
  hitRate: number;
  admission?: { maxQueueMs: number | null; rejected: number };
}

function readLines(path: string): Line[] {
  return readFileSync(path, 'utf8')
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
}

function sim(args: string[]): { stdout: string; results: Result[] } {
  const out = runCli(['sim', '--quiet', ...args], 300_000);
  assert.equal(out.status, 0, out.stderr);
  return { stdout: out.stdout, results: (JSON.parse(out.stdout) as { results: Result[] }).results };
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-3;

test('one line per request and run; the measured lines give back the run figures', () => {
  const file = join(dir, 'seed.jsonl');
  const args = [
    ...['--workload', 'seed', '--policy', 'cost,random', '--replicas', '6', '--rate', '10'],
    ...['--duration', '40', '--warmup', '5', '--kill', '2@15', '--json'],
  ];
  const plain = sim(args);
  const withFile = sim([...args, '--requests-out', file]);
  assert.equal(withFile.stdout, plain.stdout, 'the printed results do not change');
  const lines = readLines(file);
  for (const line of lines) {
    const expected = [...REQUEST_LINE_KEYS, ...(line.error === undefined ? [] : ['error'])];
    assert.deepEqual(Object.keys(line), expected);
  }
  for (const r of withFile.results) {
    const own = lines.filter((l) => l.policy === r.policy);
    assert.equal(own.length, r.arrived, `${r.policy}: a line per arrival`);
    assert.deepEqual(
      own.map((l) => l.id),
      own.map((_, i) => i),
      'arrival order, ids from 0',
    );
    assert.ok(own.every((l) => l.replicas === r.replicas));
    assert.equal(own.filter((l) => l.error === undefined).length, r.completed);
    const kinds: Record<string, number> = {};
    for (const l of own) if (l.error !== undefined) kinds[l.error] = (kinds[l.error] ?? 0) + 1;
    assert.deepEqual(kinds, r.errorsByKind);
    assert.ok((kinds['killed-mid-stream'] ?? 0) > 0, 'the kill shows in the file');
    const measured = own.filter((l) => l.error === undefined && l.arrivalMs >= r.warmupS * 1000);
    const ttft = summarize(measured.map((l) => l.ttftMs!));
    assert.equal(ttft.count, r.ttftMs.count);
    assert.ok(close(ttft.p50, r.ttftMs.p50) && close(ttft.p99, r.ttftMs.p99), r.policy);
    let prompt = 0;
    let cached = 0;
    for (const l of measured) {
      prompt += l.promptTokens;
      cached += l.cachedTokens!;
    }
    assert.ok(close(cached / prompt, r.hitRate), `${r.policy} hit rate`);
    for (const l of own.filter((x) => x.error === undefined)) {
      assert.ok(l.replica !== null && l.replica >= 0 && l.replica < r.replicas);
      assert.ok(l.endMs! >= l.arrivalMs + l.ttftMs!);
    }
  }
});

test('--max-queue-ms: each run says its bound; refused arrivals are lines too', () => {
  const file = join(dir, 'bound.jsonl');
  const { results } = sim([
    ...['--workload', 'seed', '--policy', 'cost', '--replicas', '3', '--rate', '20'],
    ...['--duration', '30', '--warmup', '3', '--max-queue-ms', '50', '--json'],
    ...['--requests-out', file],
  ]);
  const lines = readLines(file);
  const bounded = results.find((r) => r.admission?.maxQueueMs === 50)!;
  assert.ok(bounded.admission!.rejected > 0);
  const ofBound = (bound: number | null) => lines.filter((l) => l.maxQueueMs === bound);
  assert.equal(ofBound(null).length + ofBound(50).length, lines.length);
  assert.equal(ofBound(50).length, bounded.arrived);
  const rejected = ofBound(50).filter((l) => l.error === 'rejected');
  assert.equal(rejected.filter((l) => l.arrivalMs >= 3000).length, bounded.admission!.rejected);
  assert.ok(rejected.every((l) => l.replica === null && l.ttftMs === null));
  assert.equal(ofBound(null).filter((l) => l.error === 'rejected').length, 0);
});

test('a file that cannot be written is refused before any run, naming the flag', () => {
  const out = runCli(['sim', '--requests-out', join(dir, 'no/such/dir/r.jsonl')]);
  assert.equal(out.status, 2, out.stderr);
  assert.match(
    out.stderr,
    /^kvroute sim: --requests-out .*r\.jsonl: cannot write the file \(ENOENT\)\n$/,
  );
});

test('with --search on worker threads: the same output, the fixed runs recorded, no probe', () => {
  const file = join(dir, 'search.jsonl');
  const args = [
    ...['--workload', 'groups', '--policy', 'cost,random', '--replicas', '2', '--rate', '8'],
    ...['--duration', '30', '--warmup', '5', '--search', '--max-replicas', '4', '--json'],
  ];
  const serial = sim([...args, '--threads', '1']);
  const threaded = sim([...args, '--threads', '2', '--requests-out', file]);
  assert.equal(threaded.stdout, serial.stdout, 'the recorded runs and the search print the same');
  const lines = readLines(file);
  const policies = new Set(lines.map((l) => `${l.policy} x ${l.replicas}`));
  assert.deepEqual([...policies], ['cost x 2', 'random x 2'], 'the fixed runs only, in order');
  for (const r of threaded.results) {
    assert.equal(lines.filter((l) => l.policy === r.policy).length, r.arrived);
  }
});
