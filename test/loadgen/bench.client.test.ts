/**
 * The load generator against endpoints it did not start: an engine server directly (no
 * gateway), and a server that fails in every way a server can (500s, reset sockets, streams
 * cut short, refused connections): all counted, none fatal.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runBench } from '../../src/loadgen/run.ts';
import { parseBenchFlags } from '../../src/cli/bench.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { startTestEngine, waitFor } from '../support/engineServerHelpers.ts';
import { RESULT_JSON_KEYS } from '../support/sim.ts';

const base = {
  workload: { kind: 'synthetic', name: 'groups', ratePerS: 20 } as const,
  seed: 1,
  durationMs: undefined,
  warmupMs: 0,
  speedup: 1,
  concurrency: Number.POSITIVE_INFINITY,
  model: null,
  apiKey: null,
  label: null,
  replicas: null,
};

describe('bench against an engine it did not start', () => {
  let engine: EngineServerHandle;
  before(async () => {
    engine = await startTestEngine({ speedup: 50, budgetTokens: 8192, maxSeqs: 256 });
  });
  after(() => engine.close());

  test('streams every request and reports latencies and cached tokens', async () => {
    const r = await runBench({ ...base, url: engine.url, requests: 24 });
    assert.equal(r.arrived, 24);
    assert.equal(r.completed, 24);
    assert.equal(r.errors, 0);
    assert.equal(r.promptMismatches, 0);
    assert.equal(r.ttftMs.count, 24);
    assert.ok(r.ttftMs.p50 > 0 && r.tpotMs.p50 > 0 && r.itlMs.count > 0);
    // 24 prompts over 64 groups: some repeat, so some 2,048-token prefixes hit.
    assert.ok(r.hitRate !== null && r.hitRate > 0, `hit rate ${r.hitRate}`);
  });

  test('kvroute bench --json prints the simulator keys; --report the simulator charts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-report-'));
    const report = join(dir, 'r.html');
    try {
      const out = await runCli([
        'bench',
        '--url',
        engine.url,
        '--workload',
        'groups',
        '--requests',
        '6',
        '--rate',
        '20',
        '--json',
        '--report',
        report,
      ]);
      assert.equal(out.code, 0, out.stderr);
      const json = JSON.parse(out.stdout) as { results: Record<string, unknown>[] };
      const r = json.results[0]!;
      for (const key of RESULT_JSON_KEYS) {
        assert.ok(key in r, `missing ${key}`);
      }
      assert.deepEqual(Object.keys(r.ttftMs as object).slice(0, 3), ['p50', 'p90', 'p99']);
      assert.equal(r.policy, null);
      assert.equal(
        r.completed,
        6,
        `${JSON.stringify({ arrived: r.arrived, errors: r.errorsByKind })} ${out.stderr}`,
      );
      const html = readFileSync(report, 'utf8');
      assert.match(html, /TTFT CDF per policy/);
      assert.match(html, /<polyline/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('Ctrl-C prints the summary so far and exits', async () => {
    const slow = await startTestEngine({ speedup: 1 });
    try {
      const out = await runCli(
        ['bench', '--url', slow.url, '--workload', 'groups', '--rate', '5', '--duration', '600'],
        // Interrupt once requests are in flight (the CLI has its handler by then).
        () => waitFor(() => slow.counters().running > 0, 60_000, 'requests in flight'),
      );
      assert.equal(out.code, 130, out.stderr);
      assert.match(out.stdout, /TTFT p50/);
      assert.match(out.stdout, /cancelled in flight/);
    } finally {
      await slow.close();
    }
  });
});

describe('bench against a failing server', () => {
  let server: Server;
  let url: string;
  before(async () => {
    let n = 0;
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const kind = n++ % 4;
        if (kind === 0) {
          res.writeHead(500, { 'content-type': 'application/json' });
          res.end('{"error":{"message":"boom"}}');
        } else if (kind === 1) {
          req.socket.destroy();
        } else if (kind === 2) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: {"choices":[{"index":0,"text":" a"}]}\n\n');
          setTimeout(() => req.socket.destroy(), 5);
        } else {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: {"choices":[{"index":0,"text":" a"}]}\n\n');
          res.write('data: {"choices":[{"index":0,"text":" b"}]}\n\n');
          res.end(
            'data: {"choices":[],"usage":{"prompt_tokens":2176,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":2048}}}\n\ndata: [DONE]\n\n',
          );
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  test('500s, resets and cut streams are counted; good answers still measured', async () => {
    const r = await runBench({ ...base, url, model: 'm', requests: 16 });
    assert.equal(r.arrived, 16);
    assert.equal(r.completed, 4);
    assert.equal(r.errors, 12);
    assert.equal(r.errorsByKind['http-500'], 4);
    assert.equal((r.errorsByKind.dropped ?? 0) + (r.errorsByKind.truncated ?? 0), 8);
    assert.equal(r.ttftMs.count, 4);
    assert.ok(Math.abs(r.hitRate! - 2048 / 2176) < 1e-9);
  });

  test('a refused connection is an error too', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const r = await runBench({ ...base, url: `http://127.0.0.1:${port}`, requests: 3 });
    assert.equal(r.errors, 3);
    assert.equal(r.errorsByKind.refused, 3);
    assert.equal(r.completed, 0);
  });
});

describe('bench over several gateways (--url A,B)', () => {
  test('requests go to each endpoint in turn, measured as one run', async () => {
    const hits = [0, 0];
    const servers = hits.map((_, i) =>
      createServer((req, res) => {
        if (req.url === '/v1/models') {
          res.end('{"data":[{"id":"m"}]}');
          return;
        }
        if (!req.url?.startsWith('/v1/c')) {
          // The bench asks a kvroute gateway for its replicas; this server is none.
          res.writeHead(404).end();
          return;
        }
        hits[i]!++;
        req.resume();
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(
          'data: {"choices":[{"index":0,"text":" a"}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":1}}\n\ndata: [DONE]\n\n',
        );
      }),
    );
    const urls: string[] = [];
    for (const s of servers) {
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
      urls.push(`http://127.0.0.1:${(s.address() as AddressInfo).port}`);
    }
    try {
      const parsed = parseBenchFlags(['--url', `${urls[0]}/,${urls[1]}`]);
      assert.ok(parsed !== 'help');
      assert.deepEqual(parsed.urls, urls);
      assert.equal(parsed.url, urls[0]);
      const r = await runBench({ ...base, url: urls[0]!, urls, requests: 10 });
      assert.equal(r.completed, 10);
      assert.deepEqual(hits, [5, 5]);
    } finally {
      for (const s of servers) await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  test('one URL has no list; a bad item names the flag', () => {
    const one = parseBenchFlags(['--url', 'http://h:1']);
    assert.ok(one !== 'help');
    assert.equal(one.urls, undefined);
    assert.throws(() => parseBenchFlags(['--url', 'http://h:1,h:2']), /--url must be/);
  });
});

describe('bench flags', () => {
  test('defaults follow sim; bad values name the flag', () => {
    const p = parseBenchFlags(['--url', 'http://h:1/']);
    assert.ok(p !== 'help');
    assert.equal(p.url, 'http://h:1');
    assert.equal(p.seed, 1);
    assert.equal(p.durationMs, 60_000);
    assert.equal(p.warmupMs, 6_000);
    assert.equal(p.concurrency, Number.POSITIVE_INFINITY);
    assert.throws(() => parseBenchFlags([]), /--url/);
    assert.throws(() => parseBenchFlags(['--url', 'http://h:1', '--rate', '0']), /--rate/);
    assert.throws(
      () => parseBenchFlags(['--url', 'http://h:1', '--trace', 'f', '--workload', 'seed']),
      /exclusive/,
    );
  });
});

/** Runs the CLI; with `interruptWhen`, sends SIGINT once it resolves. */
function runCli(
  args: string[],
  interruptWhen?: () => Promise<void>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/kvroute.js', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    void interruptWhen?.().then(() => child.kill('SIGINT'));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
