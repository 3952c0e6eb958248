/**
 * Gateway benchmark, end to end on loopback. `npm run bench:gateway [-- --json]`.
 * - addedMs: latency the gateway adds to short streaming completions (prompt of a few tokens,
 *   4 output tokens) at a fixed 500 req/s, open loop: p50/p99 through the gateway minus p50/p99
 *   straight to the same simulated engine (`kvroute engine --speedup 1000`, so engine time is
 *   near zero), 5 s each in alternating 1 s rounds after 1 s of warm-up each.
 *   addedMsInstantBackend: the same against an instant backend, whose own latency has no tail,
 *   so the gateway's overhead shows without the engine's step jitter; in the same rounds,
 *   nodePassThroughAddedMs (a bare Node proxy: read, forward, stream back; no routing), the
 *   floor any Node HTTP proxy sets on this machine, and nginxAddedMs (nginx, when installed).
 * - throughputRps: completed requests/s through the gateway, closed loop (64 concurrent
 *   connections), against two instant backends (a trivial HTTP server answering a short SSE
 *   stream, /metrics included), and nginxThroughputRps: the same load through nginx doing
 *   round-robin proxy_pass (keep-alive upstreams, buffering off) to the same two backends.
 *   nodePassThroughRps: the same load through the bare Node proxy (round-robin over the same
 *   two backends), and passThroughVsNginx: what a single Node process that only proxies reaches
 *   against nginx on this machine.
 * - natsAddedMs: what sharing routing state over NATS (`serve --nats`) adds to the request
 *   path: a gateway with --nats (publishing every decision and release to a nats-server spawned
 *   here) against the same gateway without, in the same alternating rounds as addedMs. A peer
 *   applying the records does that work in its own process, elsewhere in a deployment; here it
 *   would only take CPU from the measured gateway, so none runs. Skipped with a message when
 *   nats-server is not installed.
 * Every server is a child process of its own (the load generator runs here); all are stopped
 * at the end. Without nginx it installs Debian's package (as root, with apt-get); failing that,
 * the nginx half is skipped with a message.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import {
  type NatsServer,
  natsServerInstalled,
  startNatsServer,
} from '../test/support/natsServer.ts';
import {
  closedLoop,
  oneRequest,
  openLoop,
  PASS_THROUGH_PROXY,
  startChild,
  startInstantBackends,
  stopChildren,
  track,
} from './gatewayLoad.ts';
import { readBenchArgs } from './flags.ts';

const JSON_OUT = readBenchArgs('bench:gateway', { json: { type: 'boolean' } }).json === true;
const BIN = fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));
const RATE_PER_S = 500;
const PHASE_S = Number(process.env.BENCH_PHASE_S ?? 5);
const WARMUP_S = 1;
const CONCURRENCY = 64;

const log = (line: string) => {
  if (!JSON_OUT) process.stdout.write(`${line}\n`);
};

const kvroute = async (args: string[], ready: RegExp) =>
  (await startChild(process.execPath, [BIN, ...args], ready)).match;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Latency at RATE_PER_S to each URL in turn, in 1 s rounds after a warm-up of each, so drift in
 * the machine's load hits every side alike. */
async function interleaved(urls: string[]): Promise<Percentiles[]> {
  for (const url of urls) await openLoop(url, RATE_PER_S, WARMUP_S);
  const samples = urls.map((): number[] => []);
  for (let round = 0; round < PHASE_S; round++) {
    for (let i = 0; i < urls.length; i++) {
      samples[i]!.push(...(await openLoop(urls[i]!, RATE_PER_S, 1)));
    }
  }
  return samples.map(stats);
}

interface Percentiles {
  p50: number;
  p99: number;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

function stats(latencies: number[]): Percentiles {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

function nginxPath(): string | null {
  for (const candidate of ['nginx', '/usr/sbin/nginx']) {
    try {
      execFileSync(candidate, ['-v'], { stdio: 'ignore' });
      return candidate;
    } catch {}
  }
  return null;
}

/**
 * nginx, installed from Debian's package when missing and this runs as root with apt-get (the
 * baseline the throughput is measured against); null when it cannot be had. The package's own
 * service is not started: its policy-rc.d, or no init, keeps it down, and the benchmark runs
 * its own nginx from a config of its own.
 */
function ensureNginx(): string | null {
  const found = nginxPath();
  if (found !== null || process.getuid?.() !== 0) return found;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = () =>
    execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'nginx'], {
      stdio: 'ignore',
      env,
      timeout: 300_000,
    });
  process.stderr.write("bench:gateway: nginx is not installed; installing Debian's package\n");
  try {
    install();
  } catch {
    try {
      execFileSync('apt-get', ['update'], { stdio: 'ignore', env, timeout: 300_000 });
      install();
    } catch (err) {
      process.stderr.write(
        `bench:gateway: apt-get install nginx failed: ${(err as Error).message}\n`,
      );
    }
  }
  return nginxPath();
}

async function startNginx(
  nginx: string,
  backends: string[],
): Promise<{ url: string; dir: string; child: ChildProcess }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-nginx-'));
  const port = await freePort();
  const servers = backends.map((b) => `server ${new URL(b).host};`).join(' ');
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes auto;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream backends { ${servers} keepalive 128; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://backends;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const child = spawn(
    nginx,
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')],
    {
      stdio: 'ignore',
    },
  );
  track(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await oneRequest(new Pool(url));
      return { url, dir, child };
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`nginx did not start: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function main(): Promise<void> {
  // 1. Added latency against the simulated engine, at a fixed rate.
  const engine = await kvroute(
    [
      'engine',
      '--port',
      '0',
      '--speedup',
      '1000',
      '--kv-events',
      'tcp://127.0.0.1:*',
      '--kv-replay',
      'tcp://127.0.0.1:*',
    ],
    /ready url=(\S+) model=\S+ events=(\S+) replay=(\S+)/,
  );
  const [, engineUrl, events, replay] = engine;
  const gateway = await kvroute(
    ['serve', '--port', '0', '--backend', `${engineUrl},events=${events},replay=${replay}`],
    /listening on (\S+)/,
  );
  const gatewayUrl = gateway[1]!;
  // The same gateway with --nats, when nats-server is here.
  const natsNote = natsServerInstalled()
    ? null
    : 'skipped: nats-server is not installed (apt-get install -y nats-server)';
  if (natsNote !== null) process.stderr.write(`bench:gateway: the NATS variant ${natsNote}\n`);
  let natsGatewayUrl: string | null = null;
  if (natsNote === null) {
    nats = await startNatsServer();
    const natsUrl = nats.url;
    const backend = `${engineUrl},events=${events},replay=${replay}`;
    const withNats = ['serve', '--port', '0', '--backend', backend, '--nats', natsUrl];
    natsGatewayUrl = (await kvroute(withNats, /listening on (\S+)/))[1]!;
  }
  log(`engine ${engineUrl}, gateway ${gatewayUrl}: ${RATE_PER_S} req/s, ${PHASE_S} s each`);
  const [direct, via, viaNats] = (await interleaved([
    engineUrl!,
    gatewayUrl,
    ...(natsGatewayUrl ? [natsGatewayUrl] : []),
  ])) as [Percentiles, Percentiles, Percentiles | undefined];
  log(`  direct   p50 ${direct.p50.toFixed(3)} ms  p99 ${direct.p99.toFixed(3)} ms`);
  log(`  gateway  p50 ${via.p50.toFixed(3)} ms  p99 ${via.p99.toFixed(3)} ms`);
  if (viaNats) {
    log(`  gateway --nats  p50 ${viaNats.p50.toFixed(3)} ms  p99 ${viaNats.p99.toFixed(3)} ms`);
  }

  // 2. Throughput against instant backends, gateway vs nginx.
  const backends = await startInstantBackends(2);
  const gw2 = await kvroute(
    ['serve', '--port', '0', '--index', 'approx', ...backends.flatMap((b) => ['--backend', b])],
    /listening on (\S+)/,
  );
  // The same rounds through the floor of any Node proxy here (pass-through, no routing) and,
  // when installed, nginx: what the machine and the runtime add, beside what the gateway adds.
  const { match: nodeProxy, child: nodeProxyChild } = await startChild(
    process.execPath,
    ['--input-type=module', '-e', PASS_THROUGH_PROXY, ...backends],
    /ready (\S+)/,
  );
  const nginx = ensureNginx();
  const nginxNote =
    nginx === null
      ? 'skipped: nginx is not installed and could not be (apt-get install -y nginx)'
      : null;
  if (nginxNote !== null) process.stderr.write(`bench:gateway: nginx half ${nginxNote}\n`);
  const nginxServer = nginx === null ? null : await startNginx(nginx, backends);
  const vias = [gw2[1]!, nodeProxy[1]!, ...(nginxServer ? [nginxServer.url] : [])];
  const [instantDirect, instantVia, nodeVia, nginxVia] = (await interleaved([
    backends[0]!,
    ...vias,
  ])) as [Percentiles, Percentiles, Percentiles, Percentiles | undefined];
  const added = (through: Percentiles) => ({
    p50: round3(through.p50 - instantDirect.p50),
    p99: round3(through.p99 - instantDirect.p99),
  });
  log(
    `instant backend, direct  p50 ${instantDirect.p50.toFixed(3)} ms  p99 ${instantDirect.p99.toFixed(3)} ms`,
  );
  log(
    `instant backend, gateway p50 ${instantVia.p50.toFixed(3)} ms  p99 ${instantVia.p99.toFixed(3)} ms`,
  );
  log(
    `instant backend, node pass-through p50 ${nodeVia.p50.toFixed(3)} ms  p99 ${nodeVia.p99.toFixed(3)} ms`,
  );
  if (nginxVia) {
    log(
      `instant backend, nginx   p50 ${nginxVia.p50.toFixed(3)} ms  p99 ${nginxVia.p99.toFixed(3)} ms`,
    );
  }
  await closedLoop(gw2[1]!, CONCURRENCY, WARMUP_S);
  const throughputRps = (await closedLoop(gw2[1]!, CONCURRENCY, PHASE_S)).requestsPerS;
  log(
    `gateway throughput (${CONCURRENCY} connections, 2 instant backends): ${throughputRps.toFixed(0)} req/s`,
  );
  // The same load through the bare Node proxy: the most any single Node process proxying it
  // reaches on this machine, the gateway's own yardstick.
  await closedLoop(nodeProxy[1]!, CONCURRENCY, WARMUP_S);
  const passThroughRps = (await closedLoop(nodeProxy[1]!, CONCURRENCY, PHASE_S)).requestsPerS;
  log(`node pass-through throughput (same load): ${passThroughRps.toFixed(0)} req/s`);
  // Only one proxy at a time takes part in the throughput half: nothing else left running.
  nodeProxyChild.kill('SIGTERM');

  let nginxThroughputRps: number | null = null;
  if (nginxServer !== null) {
    try {
      await closedLoop(nginxServer.url, CONCURRENCY, WARMUP_S);
      nginxThroughputRps = (await closedLoop(nginxServer.url, CONCURRENCY, PHASE_S)).requestsPerS;
      log(`nginx throughput (same load, same backends): ${nginxThroughputRps.toFixed(0)} req/s`);
    } finally {
      nginxServer.child.kill('SIGTERM');
      rmSync(nginxServer.dir, { recursive: true, force: true });
    }
  }

  const result = {
    addedMs: { p50: round3(via.p50 - direct.p50), p99: round3(via.p99 - direct.p99) },
    natsAddedMs: viaNats
      ? { p50: round3(viaNats.p50 - via.p50), p99: round3(viaNats.p99 - via.p99) }
      : null,
    throughputRps: Math.round(throughputRps),
    nginxThroughputRps: nginxThroughputRps === null ? null : Math.round(nginxThroughputRps),
    ratioVsNginx: nginxThroughputRps === null ? null : round3(throughputRps / nginxThroughputRps),
    nodePassThroughRps: Math.round(passThroughRps),
    passThroughVsNginx:
      nginxThroughputRps === null ? null : round3(passThroughRps / nginxThroughputRps),
    addedMsInstantBackend: added(instantVia),
    nodePassThroughAddedMs: added(nodeVia),
    nginxAddedMs: nginxVia ? added(nginxVia) : null,
    directMs: { p50: round3(direct.p50), p99: round3(direct.p99) },
    gatewayMs: { p50: round3(via.p50), p99: round3(via.p99) },
    ...(nginxNote !== null && { nginx: nginxNote }),
    ...(natsNote !== null && { nats: natsNote }),
  };
  if (JSON_OUT) process.stdout.write(`${JSON.stringify(result)}\n`);
  else log(JSON.stringify(result, null, 2));
}

/** The NATS variant's server (test/support's: a free loopback port, waited on until it accepts). */
let nats = null as NatsServer | null;

try {
  await main();
} finally {
  stopChildren();
  await nats?.close();
}
