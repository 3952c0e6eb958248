/**
 * `kvroute bench`'s client flags, shared with `kvroute sim` (src/cli/simLoadFlags.ts), against
 * a simulated engine server behind a counting proxy: the proxy sees every request the client
 * has open, so the in-flight cap and the burst are checked where the server stands, and a
 * request the client gives up is seen closed on the wire. Nothing here depends on timing: the
 * proxy parks requests until a count is reached (a burst of N all open at once, a cap reached
 * and never passed), and the timed-out requests decode for seconds of engine time where the
 * timeout is a fraction of one.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { parseBenchFlags } from '../../src/cli/bench.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { type BenchOptions, runBench } from '../../src/loadgen/run.ts';
import { metric, scrape, startTestEngine, waitFor } from '../support/engineServerHelpers.ts';

/** A proxy to `target` that counts open completions and parks them until `gate` are open. */
class CountingProxy {
  readonly server: Server;
  open = 0;
  peak = 0;
  seen = 0;
  /** Requests the client closed before their response ended. */
  clientAborts = 0;
  #gate = 0;
  #parked: (() => void)[] = [];

  constructor(target: string) {
    const { hostname, port } = new URL(target);
    this.server = createServer((req, res) => {
      const completion = req.url === '/v1/completions';
      if (completion) {
        this.seen++;
        this.open++;
        this.peak = Math.max(this.peak, this.open);
        let ended = false;
        res.on('finish', () => {
          ended = true;
        });
        res.on('close', () => {
          this.open--;
          if (!ended) this.clientAborts++;
        });
      }
      const forward = () => {
        const up = request(
          { hostname, port, path: req.url, method: req.method, headers: req.headers },
          (upRes: IncomingMessage) => {
            res.writeHead(upRes.statusCode ?? 502, upRes.headers);
            upRes.pipe(res);
          },
        );
        up.on('error', () => res.destroy());
        // The client went away: so does the request upstream (the engine sees a disconnect).
        res.on('close', () => up.destroy());
        req.pipe(up);
      };
      if (!completion || this.#gate <= 0) return forward();
      this.#parked.push(forward);
      if (this.open >= this.#gate) this.release();
    });
  }

  /** Parks completions until `n` are open at once. */
  gate(n: number): void {
    this.#gate = n;
  }

  release(): void {
    this.#gate = 0;
    for (const go of this.#parked.splice(0)) go();
  }

  reset(): void {
    this.peak = this.open;
    this.seen = 0;
    this.clientAborts = 0;
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
}

function parsed(args: string[]): BenchOptions {
  const p = parseBenchFlags(args);
  assert.ok(p !== 'help');
  return { ...p, ...(p.requests !== undefined && { requests: p.requests }) };
}

describe('kvroute bench client flags against a simulated engine', () => {
  let engine: EngineServerHandle;
  let proxy: CountingProxy;
  let url: string;
  before(async () => {
    // Speedup 1: a 256-token answer decodes for seconds, so requests overlap and a short
    // client timeout always comes first.
    engine = await startTestEngine({ speedup: 1, budgetTokens: 8192, maxSeqs: 256 });
    proxy = new CountingProxy(engine.url);
    url = await proxy.listen();
  });
  after(async () => {
    proxy.release();
    await new Promise<void>((resolve) => proxy.server.close(() => resolve()));
    await engine.close();
  });

  test('--burst N: all N open at the server at once, all measured', async () => {
    proxy.reset();
    proxy.gate(6); // hangs (to the test's guard) unless all six are in flight together
    const o = parsed(['--url', url, '--workload', 'groups', '--burst', '6', '--quiet']);
    assert.equal(o.durationMs, undefined);
    assert.equal(o.warmupMs, 0);
    const r = await runBench({ ...o, label: 'burst' });
    assert.equal(r.arrived, 6);
    assert.equal(r.completed, 6);
    assert.equal(r.errors, 0);
    assert.equal(proxy.peak, 6);
  });

  test('--max-concurrency N: never more than N open at the server, and it binds', async () => {
    proxy.reset();
    proxy.gate(3); // the first three are held until all three are open: the cap is reached
    const o = parsed([
      ...['--url', url, '--workload', 'groups', '--burst', '9'],
      ...['--max-concurrency', '3', '--quiet'],
    ]);
    assert.equal(o.concurrency, 3);
    assert.equal(o.timeFromSend, true);
    const r = await runBench(o);
    assert.equal(r.arrived, 9);
    assert.equal(r.completed, 9);
    assert.equal(proxy.seen, 9);
    assert.equal(proxy.peak, 3);
  });

  test('--client-timeout S: each request aborted on the wire, counted, its work dropped', async () => {
    proxy.reset();
    const o = parsed([
      ...['--url', url, '--workload', 'groups', '--burst', '4'],
      ...['--client-timeout', '0.25', '--quiet'],
    ]);
    assert.equal(o.clientTimeoutMs, 250);
    const r = await runBench(o);
    assert.equal(r.arrived, 4);
    assert.equal(r.completed, 0);
    assert.equal(r.errorsByKind.timeout, 4);
    assert.equal(r.errors, 4);
    // Every request that reached the server was closed by the client before its end...
    assert.equal(proxy.clientAborts, proxy.seen);
    assert.ok(proxy.seen > 0);
    // ...and the engine cancelled them as disconnects: nothing left running or waiting.
    await waitFor(
      async () => {
        const m = await scrape(engine);
        return (
          metric(m, 'vllm:num_requests_running') === 0 &&
          metric(m, 'vllm:num_requests_waiting') === 0
        );
      },
      60_000,
      'the engine to drop the timed-out requests',
    );
    const m = await scrape(engine);
    assert.ok(metric(m, 'vllm:request_success_total', 'finished_reason="abort"') >= proxy.seen);
  });

  test('flags: shared readers, their errors name the flag', () => {
    const ladder = parsed(['--url', url, '--rate-ladder', '2x5,4x5', '--burstiness', '0.5']);
    assert.deepEqual(ladder.workload.shape, {
      kind: 'ladder',
      stages: [
        { ratePerS: 2, durationS: 5 },
        { ratePerS: 4, durationS: 5 },
      ],
      burstiness: 0.5,
    });
    assert.equal(ladder.durationMs, 10_000);
    const gamma = parsed(['--url', url, '--rate', '3', '--burstiness', '2', '--duration', '30']);
    assert.deepEqual(gamma.workload.shape, { kind: 'gamma', ratePerS: 3, burstiness: 2 });
    assert.equal(gamma.durationMs, 30_000);
    // bench's --concurrency caps an open loop: it goes with a ladder.
    assert.equal(
      parsed(['--url', url, '--rate-ladder', '1x5', '--concurrency', '2']).concurrency,
      2,
    );
    const bad: [string[], RegExp][] = [
      [['--burstiness', '0', '--rate', '2'], /--burstiness must be greater than 0/],
      [['--burstiness', '-1', '--rate', '2'], /--burstiness must be greater than 0/],
      [['--burstiness', '2'], /--burstiness shapes the gaps of --rate R or --rate-ladder/],
      [['--burst', '0'], /--burst must be/],
      [['--max-concurrency', '0'], /--max-concurrency must be/],
      [['--client-timeout', '-2'], /--client-timeout must be/],
      [['--max-concurrency', '2', '--concurrency', '2'], /give one/],
      [['--rate-ladder', '2x'], /--rate-ladder takes stages/],
      [['--burst', '4', '--rate-ladder', '1x5'], /give one/],
    ];
    for (const [args, pattern] of bad) {
      assert.throws(() => parseBenchFlags(['--url', url, ...args]), pattern, args.join(' '));
    }
  });
});
