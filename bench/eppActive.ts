/**
 * Active-active endpoint pickers, live. `npm run bench:epp-active [-- --json] [-- --rounds N]
 * [-- --duration S] [-- --warmup S] [-- --speedup X] [-- --seed N]`.
 *
 * The router seed's hot workload (`kvroute sim --workload hot`: 200 customers, 8,000-token
 * prompts of which 6,000 are the customer's, one customer sending a tenth of the traffic) at
 * 4 requests/s over 4 simulated engines (`kvroute engine`, a process each), sent open loop by
 * the load generator (`src/loadgen/`: streamed completions, client-side TTFT, cached tokens from
 * the usage chunk) through a data plane in this process that plays Envoy's part: for each HTTP
 * request it opens an ext_proc stream (a real gRPC client, FULL_DUPLEX_STREAMED) to a picker,
 * round robin over the pickers, sends the headers and the body, forwards the body the picker
 * sends back to the endpoint it names, and streams the response through the picker (response
 * headers, then each chunk; what the picker echoes is what the client gets), as Envoy's ext_proc
 * filter does. Two setups on the same fleet and workload:
 *
 * - `one`: one `kvroute epp` process.
 * - `two`: two `kvroute epp --nats` processes sharing their routing state over a `nats-server`
 *   (Debian's package), the data plane alternating between them request by request.
 *
 * Each setup starts its own engines and pickers (cold caches for both), and the setups alternate
 * round by round (one, two; then two, one; ...). Figures: TTFT p50 / p99 and the hit rate
 * (cached / prompt tokens) over the requests after the warm-up, in workload ms (wall x speedup),
 * the median over rounds, and `two / one` ratios. Seeded: both setups replay the same arrivals
 * and prompts. Bounded: each run lasts `duration / speedup` seconds of wall time plus start-up
 * (default 120 s of workload at speedup 1: about 2.5 min a run, ~5 min for one round).
 *
 * Every picker process does the whole ext_proc exchange of its requests (the pick, then each
 * response chunk in and out), so on a host short of CPU one picker saturates before two do and
 * the comparison measures capacity, not the sync: `--speedup 0.5` runs the engines and the
 * arrivals at half speed (the same workload in workload time, half the exchanges a wall second).
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, request } from 'undici';
import {
  checkHealth,
  DataPlaneStream,
  type Decoded,
  dataPlaneClient,
  httpHeaders,
  requestHeaders,
  setHeader,
} from '../src/epp/dataPlane.ts';
import { DESTINATION_HEADER } from '../src/epp/messages.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { runBench } from '../src/loadgen/run.ts';
import { engineArgs, readyLine, spawnKvroute, stopChild } from '../src/loadgen/stack.ts';
import { listen } from '../src/openai/http.ts';
import type { LiveRun } from '../src/results/result.ts';
import { startNatsServer } from '../test/support/natsServer.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:epp-active', {
  json: { type: 'boolean' },
  rounds: { type: 'string' },
  duration: { type: 'string' },
  warmup: { type: 'string' },
  speedup: { type: 'string' },
  seed: { type: 'string' },
});
const flags = benchFlags('bench:epp-active');
const JSON_OUT = values.json === true;
const ROUNDS = flags.positiveNumber('rounds', values.rounds, 1);
const DURATION_S = flags.positiveNumber('duration', values.duration, 120);
const WARMUP_S = flags.positiveNumber('warmup', values.warmup, 20);
const SPEEDUP = flags.positiveNumber('speedup', values.speedup, 1);
const SEED = flags.positiveNumber('seed', values.seed, 1);
const REPLICAS = 4;
const RATE_PER_S = 4;
const CLUSTER = 'epp-active';
const log = (line: string) => {
  if (!JSON_OUT) process.stderr.write(`${line}\n`);
};

if (spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status !== 0) {
  process.stderr.write('bench:epp-active needs nats-server (apt-get install nats-server)\n');
  process.exit(2);
}

type Setup = 'one' | 'two';

/** A picker process, its gRPC client (one HTTP/2 connection, as Envoy's cluster keeps one). */
interface Picker {
  child: ChildProcess;
  address: string;
  // biome-ignore lint/suspicious/noExplicitAny: the generated client
  client: any;
}

async function startEngines(): Promise<{ children: ChildProcess[]; flags: string[] }> {
  const children: ChildProcess[] = [];
  const ready = await Promise.all(
    Array.from({ length: REPLICAS }, async (_, i) => {
      const child = spawnKvroute(engineArgs(ENGINE_DEFAULTS, SPEEDUP, i));
      children.push(child);
      return readyLine(child, /^kvroute engine ready /);
    }),
  );
  const flags = ready.flatMap((line) => {
    const field = (name: string) => new RegExp(`${name}=(\\S+)`).exec(line)?.[1];
    return ['--backend', `${field('url')},events=${field('events')},replay=${field('replay')}`];
  });
  return { children, flags };
}

async function startPicker(backendFlags: string[], natsUrl: string | null): Promise<Picker> {
  const child = spawnKvroute([
    'epp',
    '--port',
    '0',
    '--health-port',
    '0',
    '--metrics-port',
    '0',
    '--log-level',
    'error',
    ...backendFlags,
    ...(natsUrl === null
      ? []
      : ['--nats', natsUrl, '--cluster', CLUSTER, '--nats-heartbeat-ms', '200']),
  ]);
  const banner = await readyLine(child, /^kvroute epp listening on /);
  const address = /listening on (\S+)/.exec(banner)![1]!;
  // Ready once a pool has a backend in its router (the kubelet's readiness probe).
  for (let i = 0; ; i++) {
    const health = await checkHealth(address, 'readiness');
    if ('status' in health && health.status === 'SERVING') break;
    if (i >= 600) throw new Error(`picker ${address} not ready after 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, address, client: dataPlaneClient(address) };
}

const upstream = new Agent({ headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 30_000 });

/** The picker's answers on the response path: the chunks to forward, in order, until the end. */
async function forwardAnswers(stream: DataPlaneStream, res: ServerResponse): Promise<void> {
  for (;;) {
    const answer: Decoded = await stream.next(120_000);
    if (answer === null) throw new Error('the picker ended the stream mid-response');
    if (answer.response !== 'response_body') continue;
    const streamed = answer.response_body?.response?.body_mutation?.streamed_response;
    if (!streamed) continue;
    if (streamed.body?.length > 0) res.write(Buffer.from(streamed.body));
    if (streamed.end_of_stream) return;
  }
}

/** One HTTP request through the data plane: the pick, the upstream, the response path. */
async function serveOne(
  pickers: Picker[],
  turn: number,
  req: IncomingMessage,
  res: ServerResponse,
) {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const body = Buffer.concat(chunks);
  const picker = pickers[turn % pickers.length]!;
  const stream = new DataPlaneStream(picker.client);
  try {
    stream.send(requestHeaders(req.url ?? '/'));
    stream.send({ request_body: { body, end_of_stream: true } });
    const head: Decoded = await stream.next(120_000);
    if (head?.response === 'immediate_response') {
      const imm = head.immediate_response;
      res.writeHead(Number(imm.status?.code) || 503, { 'content-type': 'application/json' });
      res.end(Buffer.from(imm.body ?? ''));
      return;
    }
    if (head?.response !== 'request_headers') throw new Error(`unexpected ${head?.response}`);
    const endpoint = setHeader(head.request_headers, DESTINATION_HEADER);
    if (!endpoint) throw new Error('no destination endpoint in the header answer');
    const forwarded: Buffer[] = [];
    for (;;) {
      const part: Decoded = await stream.next(120_000);
      const streamed = part?.request_body?.response?.body_mutation?.streamed_response;
      if (!streamed) throw new Error(`expected a body chunk, got ${part?.response}`);
      forwarded.push(Buffer.from(streamed.body));
      if (streamed.end_of_stream) break;
    }
    const up = await request(`http://${endpoint}${req.url}`, {
      method: 'POST',
      dispatcher: upstream,
      headers: { 'content-type': 'application/json' },
      body: Buffer.concat(forwarded),
    });
    const contentType = String(up.headers['content-type'] ?? 'application/json');
    stream.send({
      response_headers: httpHeaders({
        ':status': String(up.statusCode),
        'content-type': contentType,
      }),
    });
    const respHead: Decoded = await stream.next(120_000);
    const replica = setHeader(respHead?.response_headers, 'x-kvroute-replica');
    res.writeHead(up.statusCode, {
      'content-type': contentType,
      ...(replica !== undefined && { 'x-kvroute-replica': replica }),
    });
    const answered = forwardAnswers(stream, res);
    for await (const chunk of up.body) {
      stream.send({ response_body: { body: chunk as Buffer, end_of_stream: false } });
    }
    stream.send({ response_body: { body: Buffer.alloc(0), end_of_stream: true } });
    await answered;
    res.end();
    stream.end();
    await stream.status;
  } catch (err) {
    stream.cancel();
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`data plane: ${(err as Error).message}`);
  }
}

async function runSetup(setup: Setup, natsUrl: string): Promise<LiveRun> {
  const engines = await startEngines();
  const pickers: Picker[] = [];
  const server = createServer();
  try {
    for (let i = 0; i < (setup === 'one' ? 1 : 2); i++) {
      pickers.push(await startPicker(engines.flags, setup === 'one' ? null : natsUrl));
    }
    // A few heartbeats, so that the two pickers know each other before the first request.
    await new Promise((r) => setTimeout(r, 1_000));
    let turn = 0;
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'POST') {
        res.writeHead(404).end();
        return;
      }
      void serveOne(pickers, turn++, req, res);
    });
    const { port } = await listen(server, 0, '127.0.0.1');
    log(`${setup}: ${pickers.length} picker(s) ${pickers.map((p) => p.address).join(', ')}`);
    return await runBench({
      url: `http://127.0.0.1:${port}`,
      workload: { kind: 'synthetic', name: 'hot', ratePerS: RATE_PER_S },
      seed: SEED,
      durationMs: DURATION_S * 1000,
      warmupMs: WARMUP_S * 1000,
      speedup: SPEEDUP,
      concurrency: Number.POSITIVE_INFINITY,
      model: null,
      apiKey: null,
      label: setup,
      replicas: REPLICAS,
    });
  } finally {
    server.close();
    server.closeAllConnections();
    for (const p of pickers) p.client.close();
    await Promise.all([
      ...pickers.map((p) => stopChild(p.child)),
      ...engines.children.map(stopChild),
    ]);
  }
}

const nats = await startNatsServer();
const runs: Record<Setup, LiveRun[]> = { one: [], two: [] };
try {
  for (let r = 0; r < ROUNDS; r++) {
    const order: Setup[] = r % 2 === 0 ? ['one', 'two'] : ['two', 'one'];
    for (const setup of order) {
      const run = await runSetup(setup, nats.url);
      runs[setup].push(run);
      log(
        `round ${r + 1}/${ROUNDS} ${setup}: TTFT p50 ${run.ttftMs.p50.toFixed(0)} ms, p99 ${run.ttftMs.p99.toFixed(0)} ms, hit rate ${((run.hitRate ?? Number.NaN) * 100).toFixed(1)} %, ${run.completed}/${run.arrived} completed, ${run.errors} errors`,
      );
    }
  }
} finally {
  await upstream.close();
  await nats.close();
}

/** The median; of an even count, the mean of the middle two. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
const round = (x: number, digits = 3) => Number(x.toFixed(digits));
const figures = (setup: Setup) => ({
  ttftP50Ms: round(median(runs[setup].map((r) => r.ttftMs.p50)), 1),
  ttftP99Ms: round(median(runs[setup].map((r) => r.ttftMs.p99)), 1),
  hitRate: round(median(runs[setup].map((r) => r.hitRate ?? Number.NaN)), 4),
  measured: median(runs[setup].map((r) => r.ttftMs.count)),
  errors: runs[setup].reduce((a, r) => a + r.errors, 0),
  perRound: runs[setup].map((r) => ({
    ttftP50Ms: round(r.ttftMs.p50, 1),
    ttftP99Ms: round(r.ttftMs.p99, 1),
    hitRate: round(r.hitRate ?? Number.NaN, 4),
  })),
});
const one = figures('one');
const two = figures('two');
const result = {
  workload: 'hot',
  ratePerS: RATE_PER_S,
  replicas: REPLICAS,
  durationS: DURATION_S,
  warmupS: WARMUP_S,
  speedup: SPEEDUP,
  seed: SEED,
  rounds: ROUNDS,
  one,
  two,
  ratio: {
    ttftP50: round(two.ttftP50Ms / one.ttftP50Ms),
    ttftP99: round(two.ttftP99Ms / one.ttftP99Ms),
    hitRate: round(two.hitRate / one.hitRate),
  },
};
if (JSON_OUT) process.stdout.write(`${JSON.stringify(result)}\n`);
else {
  const row = (name: string, f: typeof one) =>
    `  ${name.padEnd(24)} TTFT p50 ${f.ttftP50Ms} ms, p99 ${f.ttftP99Ms} ms, hit rate ${(f.hitRate * 100).toFixed(1)} % (${f.measured} measured, ${f.errors} errors)\n`;
  process.stdout.write(
    `hot workload, ${RATE_PER_S} req/s, ${REPLICAS} engines, ${DURATION_S} s (warm-up ${WARMUP_S} s) at speedup ${SPEEDUP}, seed ${SEED}, median of ${ROUNDS} round(s)\n` +
      row('one picker', one) +
      row('two pickers over NATS', two) +
      `  two / one: TTFT p50 x${result.ratio.ttftP50}, p99 x${result.ratio.ttftP99}, hit rate x${result.ratio.hitRate} (target: within 10 %)\n`,
  );
}
