/**
 * What `kvroute bench` says about a run beyond its latencies: the SLO it judged by (table, JSON,
 * report; `--slo-ttft-p99-ms` as sim takes it), the replica count a kvroute gateway reports, a
 * report with charts over time, a warning when the fleet was warm before the run, progress off
 * a TTY, and `--requests-out` with sim's keys (the replica from the gateway's header).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PROGRESS_INTERVAL_ENV } from '../../src/cli/progress.ts';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { type LiveStack, startStack } from '../../src/loadgen/stack.ts';
import type { BenchRequest } from '../../src/loadgen/collect.ts';
import { coldStartCheck } from '../../src/loadgen/warmStart.ts';
import { runBench } from '../../src/loadgen/run.ts';
import type { RequestRecord } from '../../src/results/requestRecord.ts';
import { startTestEngine } from '../support/engineServerHelpers.ts';
import { REQUEST_LINE_KEYS } from '../support/sim.ts';

const dir = mkdtempSync(join(tmpdir(), 'bench-report-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** `kvroute bench ARGS` in a child process, stdout and stderr piped (not a TTY). */
function bench(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/kvroute.js', 'bench', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const GROUPS = ['--workload', 'groups', '--rate', '40', '--requests', '24'];

describe('against one engine', () => {
  let engine: EngineServerHandle;
  before(async () => {
    engine = await startTestEngine({ speedup: 50, budgetTokens: 8192, maxSeqs: 256 });
  });
  after(() => engine.close());

  test('a second run of the same seed warns that the fleet was warm; the first does not', async () => {
    const report = join(dir, 'warm.html');
    const first = await bench(['--url', engine.url, ...GROUPS, '--json', '--quiet']);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stderr, '');
    const cold = JSON.parse(first.stdout).results[0];
    // On a busy host a customer's second request can overtake its first on the wire, so a
    // first request may find its prefix cached on a fresh engine: a few, never most.
    assert.equal(cold.coldStart.warm, false);
    assert.ok(cold.coldStart.cached <= 2, JSON.stringify(cold.coldStart));
    assert.ok(cold.coldStart.requests >= 10, JSON.stringify(cold.coldStart));

    const second = await bench(['--url', engine.url, ...GROUPS, '--report', report, '--quiet']);
    assert.equal(second.code, 0, second.stderr);
    assert.match(
      second.stderr,
      /^kvroute bench: warning: (\d+) of the first \1 requests of new customers found their prompt cached: the fleet was warm before this run/,
    );
    assert.match(readFileSync(report, 'utf8'), /Warning \(bench\):<\/strong> \d+ of the first/);
  });

  test('the SLO: default said to be sim’s, --slo-ttft-p99-ms taken, in table, JSON and report', async () => {
    const report = join(dir, 'slo.html');
    const plain = await bench(['--url', engine.url, ...GROUPS, '--quiet']);
    assert.equal(plain.code, 0, plain.stderr);
    const [head, , row, legend] = plain.stdout.split('\n');
    assert.match(head!, / SLO$/);
    assert.match(row!, / (met|missed)$/);
    assert.match(
      legend!,
      /SLO: met when TTFT p99 ≤ 570 ms, TPOT p99 ≤ 100 ms, no errors \(kvroute sim's default/,
    );
    const loose = await bench([
      ...['--url', engine.url, ...GROUPS, '--quiet', '--json', '--report', report],
      ...['--slo-ttft-p99-ms', '60000', '--slo-tpot-p99-ms', '5000'],
    ]);
    assert.equal(loose.code, 0, loose.stderr);
    const r = JSON.parse(loose.stdout).results[0];
    assert.deepEqual(r.slo, { ttftP99Ms: 60000, tpotP99Ms: 5000 });
    assert.equal(r.sloMet, true);
    const html = readFileSync(report, 'utf8');
    assert.match(html, /SLO: TTFT p99 ≤ 60000 ms, TPOT p99 ≤ 5000 ms, no errors \(from/);
    assert.match(html, /<td>met<\/td>/);
    const bad = await bench(['--url', engine.url, '--slo-ttft-p99-ms', '0']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^kvroute bench: --slo-ttft-p99-ms must be greater than 0/);
  });

  test('off a TTY, progress lines on stderr; --quiet silences them', async () => {
    const args = ['--url', engine.url, '--workload', 'groups', '--rate', '20', '--requests', '40'];
    const env = { [PROGRESS_INTERVAL_ENV]: '1' };
    const loud = await bench(args, env);
    assert.equal(loud.code, 0, loud.stderr);
    const lines = loud.stderr.split('\n').filter((l) => l.startsWith('kvroute bench: bench: '));
    assert.ok(lines.length >= 2, loud.stderr);
    const status =
      /^kvroute bench: bench: groups \d+ % of requests \(sent \d+\/40, in flight \d+, done \d+, errors 0, TTFT p50 /;
    assert.ok(
      lines.some((l) => status.test(l)),
      loud.stderr,
    );
    assert.doesNotMatch(loud.stdout, /kvroute bench:/);
    const quiet = await bench([...args, '--quiet'], env);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.doesNotMatch(quiet.stderr, /kvroute bench: bench:/);
  });
});

describe('through a kvroute gateway', () => {
  let stack: LiveStack;
  before(async () => {
    stack = await startStack({
      replicas: 2,
      policy: 'cost',
      speedup: 50,
      engine: ENGINE_DEFAULTS,
      mode: 'inprocess',
    });
  });
  after(() => stack.close());

  test('replicas from /router/replicas; --requests-out names each request its replica', async () => {
    const records: RequestRecord[] = [];
    const r = await runBench({
      url: stack.url,
      workload: { kind: 'synthetic', name: 'groups', ratePerS: 40 },
      seed: 3,
      durationMs: undefined,
      requests: 16,
      warmupMs: 0,
      speedup: 50,
      concurrency: Number.POSITIVE_INFINITY,
      model: null,
      apiKey: null,
      label: 'cost',
      replicas: null,
      onRequest: (rec) => records.push(rec),
    });
    assert.equal(r.replicas, 2);
    assert.equal(records.length, 16);
    assert.deepEqual(
      records.map((x) => x.id),
      [...Array(16).keys()],
    );
    const names = new Set(records.map((x) => x.replica));
    assert.ok(names.size >= 1 && names.size <= 2, [...names].join());
    for (const rec of records) {
      assert.equal(typeof rec.replica, 'string');
      assert.equal(rec.policy, 'cost');
      assert.equal(rec.replicas, 2);
      assert.equal(rec.error, undefined);
      assert.ok(rec.ttftMs! > 0 && rec.endMs! > rec.arrivalMs + rec.ttftMs!);
    }
  });

  test('kvroute bench --report: replicas, several charts, no NaN; --requests-out lines', async () => {
    const report = join(dir, 'gateway.html');
    const file = join(dir, 'gateway.jsonl');
    const out = await bench([
      ...['--url', stack.url, ...GROUPS, '--speedup', '50', '--quiet'],
      ...['--report', report, '--requests-out', file],
    ]);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout.split('\n')[2]!, /^-\s+2\s/);
    assert.match(out.stdout, /^requests: .*gateway\.jsonl$/m);
    const html = readFileSync(report, 'utf8');
    assert.doesNotMatch(html, /NaN/);
    assert.match(html, /<tr><td>bench<\/td><td>2<\/td>/);
    for (const title of [
      'TTFT CDF per policy',
      'TTFT over time',
      'TPOT over time',
      'Prefix-cache hit rate over time',
      'Requests and errors per second',
    ]) {
      assert.match(html, new RegExp(`<h2>${title}`));
    }
    const lines = readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 24);
    assert.deepEqual(Object.keys(lines[0]), REQUEST_LINE_KEYS);
    assert.ok(lines.every((l) => typeof l.replica === 'string' && l.replicas === 2));
  });
});

test('the warm-fleet rule: first requests of new customers, a tenth of the prompt, over half', () => {
  const req = (index: number, customer: number, cached: number | null): BenchRequest => ({
    index,
    customer,
    arrivalMs: index,
    replica: null,
    promptTokens: 1000,
    cachedTokens: cached,
    ttftMs: 1,
    tpotMs: 1,
    endMs: 2,
    error: null,
  });
  // Repeats of a customer do not count, whatever they hit; a BOS-sized hit is not a hit.
  const cold = [req(0, 1, 0), req(1, 1, 900), req(2, 2, 16), req(3, 3, 0), req(4, 2, 900)];
  assert.deepEqual(coldStartCheck(cold), { requests: 3, cached: 0, warm: false });
  const warm = [req(2, 3, 0), req(0, 1, 100), req(1, 2, 800)];
  assert.deepEqual(coldStartCheck(warm), { requests: 3, cached: 2, warm: true });
  // Exactly half is not more than half; only the first 20 new customers are looked at.
  assert.equal(coldStartCheck([req(0, 1, 500), req(1, 2, 0)])!.warm, false);
  const late = Array.from({ length: 30 }, (_, i) => req(i, i, i < 20 ? 0 : 1000));
  assert.deepEqual(coldStartCheck(late), { requests: 20, cached: 0, warm: false });
  // No cached-token counts (a server that does not report them): no verdict.
  assert.equal(coldStartCheck([req(0, 1, null)]), null);
});
