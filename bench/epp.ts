/**
 * Endpoint picker benchmark. `npm run bench:epp [-- --json] [-- --runs N] [-- --exchanges N]`.
 *
 * `kvroute epp` as deployed, a process of its own (cost policy, KV events on, builtin
 * cl100k_base tokenizer), over 4 simulated engines (`kvroute engine`, a process each), and a
 * gRPC client in this process on loopback playing Envoy's ext_proc filter
 * (FULL_DUPLEX_STREAMED): per exchange, the request headers and one body chunk holding an
 * 8,000-token chat with `end_of_stream`, timed until the answer to the headers (the header
 * mutation naming the endpoint) arrives; then the stream is closed (its ledger entry goes).
 * That span holds the gRPC round trip, decoding the 40 kB body, JSON parse, chat template,
 * tokenizing 8,000 tokens, block keys, admission and the router's pick. Exchanges run one at a
 * time, after a warm-up; each figure is the median over RUNS runs of EXCHANGES exchanges.
 *
 * - pickMs {p50, p99}: the router seed's shape: a 6,000-token system prompt (one of 4,
 *   rotating: seen before, so the tokenizer's section cache has it) and a 2,000-token user
 *   message new in every request.
 * - repeatMs: the same 8,000-token chat every time (a retried or duplicated request).
 * - uniqueMs: all 8,000 tokens new in every request (no section cache hit; word cache warm).
 * - serverMs {pickMs, repeatMs, uniqueMs}: the picker's own share of each case, the mean of its
 *   `kvroute_gateway_pre_upstream_seconds` histogram (stream start to the header answer:
 *   decode, parse, tokenize, key, admit, route); the rest of an exchange is gRPC on both sides.
 *   That span starts at the headers, so it also holds the body's way through gRPC.
 * - serverUnderHalfMs {pickMs, ...}: the share of exchanges whose picker share was at most 0.5 ms
 *   (the histogram's 0.5 ms bucket): its p50 is at most 0.5 ms when this is at least 0.5.
 * - floorMs {p50, p99}: the pickMs exchanges, same payloads, right after them in each run, against
 *   `bench/eppFloor.ts`: a process answering with the picker's codec and doing nothing else. What
 *   gRPC costs here on both sides; pickOverFloorMs (the median of the runs' pickMs p50 minus
 *   floorMs p50) is what the picker's work adds to an exchange; floorCpuMs {client, server}: CPU
 *   ms per floor exchange of this process and of the stand-in, all threads (Linux /proc).
 * Text: TypeScript's ThirdPartyNoticeText.txt (English prose), cut at a new offset per message.
 * - inProcessUs: three of the picker's steps timed in this process on the seed shape's bodies, each
 *   beside what it replaced (alternating, median of RUNS; a ratio that a busy machine leaves
 *   standing): `decode` the body to a string (`toString('utf8')` against `decodeUtf8`), `encode`
 *   the header answer and the body chunk (proto-loader's serializer against `wire.ts`),
 *   `requestDecode` one streamed exchange's requests (headers, body, response headers, 16 token
 *   chunks; proto-loader's deserializer against `wireIn.ts`).
 * `--cases pickMs,uniqueMs`: only those exchanges (e.g. for a profile of one shape).
 * `BENCH_EPP_CPU_PROF=DIR`: the picker runs under `node --cpu-prof` and leaves its profile in DIR.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import {
  DataPlaneStream,
  dataPlaneClient,
  httpHeaders,
  requestHeaders,
} from '../src/epp/dataPlane.ts';
import type { ProcessingResponse } from '../src/epp/messages.ts';
import { EXT_PROC_SERVICE, serviceDefinition } from '../src/epp/protos.ts';
import { encodeProcessingResponse } from '../src/epp/wire.ts';
import { decodeProcessingRequest } from '../src/epp/wireIn.ts';
import { decodeUtf8 } from '../src/openai/utf8.ts';
import { pickAnswers } from './eppAnswers.ts';
import { cpuSecondsOf } from './gatewayLoad.ts';
import { chatInput } from '../src/tokenizer/chat.ts';
import { loadPromptTokenizer } from '../src/tokenizer/promptTokenizer.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:epp', {
  json: { type: 'boolean' },
  runs: { type: 'string' },
  exchanges: { type: 'string' },
  cases: { type: 'string' },
});
const flags = benchFlags('bench:epp');
const json = values.json === true;
const RUNS = flags.positiveInt('runs', values.runs, 5);
const EXCHANGES = flags.positiveInt('exchanges', values.exchanges, 200);
const WARMUP = 50;
const SYSTEM_TOKENS = 6_000;
const USER_TOKENS = 2_000;
const SYSTEM_PROMPTS = 4;

const require = createRequire(import.meta.url);
const corpus = readFileSync(require.resolve('typescript/ThirdPartyNoticeText.txt'), 'utf8');
const words = corpus.split(/(?<=\s)/);
const counter = loadPromptTokenizer({ tokenizer: 'builtin', chatTemplate: null });

/** Text of about `tokens` tokens from word `offset` of the corpus (wrapping around). */
function textOf(offset: number, tokens: number): string {
  const parts: string[] = [];
  let i = offset;
  // A guess by characters first (about 4 a token in English), then topped up by counting.
  for (let chars = 0; chars < tokens * 3.5; ) {
    const w = words[i++ % words.length]!;
    parts.push(w);
    chars += w.length;
  }
  while (counter.text.encode(parts.join('')).length < tokens) {
    for (let k = 0; k < 50; k++) parts.push(words[i++ % words.length]!);
  }
  return parts.join('');
}

let nextOffset = 1;
const freshText = (tokens: number): string => textOf((nextOffset += 7919), tokens);
const systems = Array.from({ length: SYSTEM_PROMPTS }, () => freshText(SYSTEM_TOKENS));
const body = (system: string, user: string): Buffer =>
  Buffer.from(
    JSON.stringify({
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      max_tokens: 16,
      stream: true,
    }),
  );
const promptTokens = counter.encodeChat(
  chatInput([
    { role: 'system', content: systems[0]! },
    { role: 'user', content: freshText(USER_TOKENS) },
  ]),
).length;

type Case = 'pickMs' | 'repeatMs' | 'uniqueMs';
const repeated = body(systems[0]!, freshText(USER_TOKENS));
let served = 0;
const bodies: Record<Case, () => Buffer> = {
  pickMs: () => body(systems[served++ % SYSTEM_PROMPTS]!, freshText(USER_TOKENS)),
  repeatMs: () => repeated,
  uniqueMs: () => body(freshText(SYSTEM_TOKENS), freshText(USER_TOKENS)),
};

const BIN = fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));
const children: ChildProcess[] = [];
// However this process ends, what it started goes with it.
process.once('exit', () => {
  for (const c of children) c.kill('SIGTERM');
});

const PROFILE_DIR = process.env.BENCH_EPP_CPU_PROF;

/** Starts `kvroute ARGS` and resolves with its first stdout line (its ready line). */
async function startCli(args: string[], nodeArgs: string[] = []): Promise<string> {
  return (await startNode([...nodeArgs, BIN, ...args], `kvroute ${args[0]}`)).line;
}

/** Starts node with `argv` and resolves with its first stdout line. */
function startNode(argv: string[], name: string): Promise<{ line: string; pid: number }> {
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  child.stdout.setEncoding('utf8');
  // The stream stays open after the first line: a closed pipe would end the child.
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('\n')) resolve({ line: out, pid: child.pid! });
    });
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}): ${out}`)));
  });
}

const engineArgs = ['engine', '--port', '0', '--speedup', '50'];
const zmq = ['--kv-events', 'tcp://127.0.0.1:*', '--kv-replay', 'tcp://127.0.0.1:*'];
const backendArgs: string[] = [];
for (let i = 0; i < 4; i++) {
  const ready = await startCli([...engineArgs, ...zmq, '--seed', String(i)]);
  const [, url, events, replay] = /url=(\S+) .*events=(\S+) replay=(\S+)/.exec(ready) ?? [];
  if (!url) throw new Error(`unexpected engine ready line: ${ready}`);
  backendArgs.push('--backend', `${url},events=${events},replay=${replay}`);
}
const banner = await startCli(
  ['epp', '--port', '0', '--health-port', '0', '--metrics-port', '0', ...backendArgs],
  PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [],
);
const address = /listening on (\S+)/.exec(banner)?.[1];
const metricsUrl = /metrics (http:\/\/[^\s;]+)/.exec(banner)?.[1];
if (!address || !metricsUrl) throw new Error(`kvroute epp did not start: ${banner}`);
const client = dataPlaneClient(address);
const floorProcess = await startNode(
  ['--import', 'tsx', fileURLToPath(new URL('./eppFloor.ts', import.meta.url))],
  'bench/eppFloor.ts',
);
const floorAddress = /listening on (\S+)/.exec(floorProcess.line)?.[1];
if (!floorAddress) throw new Error(`bench/eppFloor.ts did not start: ${floorProcess.line}`);
const floorClient = dataPlaneClient(floorAddress);

/**
 * Sum and count of the picker's pre-upstream histogram, from its /metrics, and how many were
 * at most 0.5 ms (a bucket's bound: the share's p50 is <= 0.5 ms when half of them were).
 */
async function serverSeconds(): Promise<{ sum: number; count: number; underHalfMs: number }> {
  let text = '';
  for (let attempt = 0; ; attempt++) {
    try {
      text = await (await fetch(metricsUrl!)).text();
      break;
    } catch (err) {
      // A kept-alive connection the server closed meanwhile: ask again on a new one.
      if (attempt >= 2) throw err;
    }
  }
  const read = (suffix: string, labels = '[^}]*') =>
    [
      ...text.matchAll(
        new RegExp(`^kvroute_gateway_pre_upstream_seconds_${suffix}\\{${labels}\\} (\\S+)$`, 'gm'),
      ),
    ]
      .map((m) => Number(m[1]))
      .reduce((a, b) => a + b, 0);
  return {
    sum: read('sum'),
    count: read('count'),
    underHalfMs: read('bucket', '(?:[^}]*,)?le="0\\.0005"[^}]*'),
  };
}

/** One exchange: headers and the whole body in, the header mutation back; then closed. */
async function exchangeMs(payload: Buffer, via = client): Promise<number> {
  const stream = new DataPlaneStream(via);
  const startedNs = process.hrtime.bigint();
  stream.send(requestHeaders('/v1/chat/completions'));
  stream.send({ request_body: { body: payload, end_of_stream: true } });
  const head = await stream.next();
  const ms = Number(process.hrtime.bigint() - startedNs) / 1e6;
  if (head?.response !== 'request_headers') {
    throw new Error(
      `expected the header mutation, got ${JSON.stringify(head).slice(0, 300)} (${JSON.stringify(await stream.status)})`,
    );
  }
  // Half-closed: the picker ends the stream and releases its ledger entry.
  stream.end();
  await stream.status;
  return ms;
}

function quantiles(xs: number[]): { p50: number; p99: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const ALL_CASES: Case[] = ['pickMs', 'repeatMs', 'uniqueMs'];
// `--cases pickMs,uniqueMs`: only those (a profile of one shape); default all three.
const cases: Case[] = flags.list('cases', values.cases, ALL_CASES);
const runs: Record<Case, { p50: number; p99: number }[]> = {
  pickMs: [],
  repeatMs: [],
  uniqueMs: [],
};
const server: Record<Case, { sum: number; count: number; underHalfMs: number }> = {
  pickMs: { sum: 0, count: 0, underHalfMs: 0 },
  repeatMs: { sum: 0, count: 0, underHalfMs: 0 },
  uniqueMs: { sum: 0, count: 0, underHalfMs: 0 },
};
/** The same seed-shaped exchanges against bench/eppFloor.ts: gRPC alone, no picker work. */
const floorRuns: { p50: number; p99: number }[] = [];
const overFloorMs: number[] = [];
/** CPU ms per floor exchange, all threads: this process (the client) and the stand-in. */
const floorCpu = { client: [] as number[], server: [] as number[] };
// Payloads are built before timing; the warm-up fills the tokenizer's word cache and the JIT.
for (let i = 0; i < WARMUP; i++) {
  const payload = bodies.pickMs();
  await exchangeMs(payload);
  await exchangeMs(payload, floorClient);
}
for (let r = 0; r < RUNS; r++) {
  for (const c of cases) {
    const payloads = Array.from({ length: EXCHANGES }, bodies[c]);
    const ms: number[] = [];
    const before = await serverSeconds();
    for (const p of payloads) ms.push(await exchangeMs(p));
    const after = await serverSeconds();
    server[c].sum += after.sum - before.sum;
    server[c].count += after.count - before.count;
    server[c].underHalfMs += after.underHalfMs - before.underHalfMs;
    runs[c].push(quantiles(ms));
    if (c === 'pickMs') {
      const cpu0 = [cpuSecondsOf(process.pid), cpuSecondsOf(floorProcess.pid)];
      const floorTimes: number[] = [];
      for (const p of payloads) floorTimes.push(await exchangeMs(p, floorClient));
      const floor = quantiles(floorTimes);
      const cpu1 = [cpuSecondsOf(process.pid), cpuSecondsOf(floorProcess.pid)];
      if (cpu0.every((x) => x !== null) && cpu1.every((x) => x !== null)) {
        floorCpu.client.push(((cpu1[0]! - cpu0[0]!) * 1000) / payloads.length);
        floorCpu.server.push(((cpu1[1]! - cpu0[1]!) * 1000) / payloads.length);
      }
      floorRuns.push(floor);
      overFloorMs.push(quantiles(ms).p50 - floor.p50);
    }
  }
}
client.close();
floorClient.close();
for (const c of children) c.kill('SIGTERM');

/** Mean µs of one call of `f` over `calls`, after a warm-up. */
function usPerCall(f: () => unknown, calls: number): number {
  for (let i = 0; i < 50; i++) f();
  const started = performance.now();
  for (let i = 0; i < calls; i++) f();
  return ((performance.now() - started) * 1000) / calls;
}
const sample = Array.from({ length: 20 }, bodies.pickMs);
const protoLoaderProcess = (
  serviceDefinition(EXT_PROC_SERVICE) as unknown as {
    Process: {
      responseSerialize(r: ProcessingResponse): Buffer;
      requestSerialize(r: Record<string, unknown>): Buffer;
      requestDeserialize(b: Buffer): unknown;
    };
  }
).Process;
const protoLoader = protoLoaderProcess.responseSerialize;
// What the data plane sends for one streamed exchange: the headers, the body, the response
// headers and a streamed response's token chunks (16, as the benchmark's max_tokens).
const tokenChunk = Buffer.from(
  `data: ${JSON.stringify({ id: 'cmpl-1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: ' word' }, finish_reason: null }] })}\n\n`,
);
const requestMessages = (payload: Buffer): Buffer[] =>
  [
    requestHeaders('/v1/chat/completions'),
    { request_body: { body: payload, end_of_stream: true } },
    {
      response_headers: httpHeaders({ ':status': '200', 'content-type': 'text/event-stream' }),
    },
    ...Array.from({ length: 16 }, () => ({ response_body: { body: tokenChunk } })),
  ].map((m) => protoLoaderProcess.requestSerialize(m));
const sampleAnswers = sample.map((payload) => pickAnswers(payload));
const sampleRequests = sample.map(requestMessages);
const steps = {
  decode: {
    before: () => {
      for (const b of sample) b.toString('utf8');
    },
    after: () => {
      for (const b of sample) decodeUtf8(b);
    },
  },
  requestDecode: {
    before: () => {
      for (const ms of sampleRequests) for (const m of ms) protoLoaderProcess.requestDeserialize(m);
    },
    after: () => {
      for (const ms of sampleRequests) for (const m of ms) decodeProcessingRequest(m);
    },
  },
  encode: {
    before: () => {
      for (const a of sampleAnswers) for (const r of a) protoLoader(r);
    },
    after: () => {
      for (const a of sampleAnswers) for (const r of a) encodeProcessingResponse(r);
    },
  },
};
const inProcess: Record<string, { before: number[]; after: number[] }> = {};
for (const [name, step] of Object.entries(steps)) {
  const times = { before: [] as number[], after: [] as number[] };
  for (let r = 0; r < RUNS; r++) {
    times.before.push(usPerCall(step.before, 50) / sample.length);
    times.after.push(usPerCall(step.after, 50) / sample.length);
  }
  inProcess[name] = times;
}
await Promise.all(children.map((c) => new Promise((resolve) => c.once('exit', resolve))));

const round = (x: number) => Number(x.toFixed(3));
const summary = Object.fromEntries(
  cases.map((c) => [
    c,
    {
      p50: round(median(runs[c].map((q) => q.p50))),
      p99: round(median(runs[c].map((q) => q.p99))),
    },
  ]),
) as Record<Case, { p50: number; p99: number }>;
const serverMs = Object.fromEntries(
  cases.map((c) => [c, round((server[c].sum / server[c].count) * 1000)]),
) as Record<Case, number>;
const serverUnderHalfMs = Object.fromEntries(
  cases.map((c) => [c, round(server[c].underHalfMs / server[c].count)]),
) as Record<Case, number>;
const floor =
  floorRuns.length === 0
    ? null
    : {
        floorMs: {
          p50: round(median(floorRuns.map((q) => q.p50))),
          p99: round(median(floorRuns.map((q) => q.p99))),
        },
        pickOverFloorMs: round(median(overFloorMs)),
        ...(floorCpu.client.length > 0 && {
          floorCpuMs: {
            client: round(median(floorCpu.client)),
            server: round(median(floorCpu.server)),
          },
        }),
      };
const inProcessUs = Object.fromEntries(
  Object.entries(inProcess).map(([name, t]) => {
    const before = median(t.before);
    const after = median(t.after);
    return [name, { before: round(before), after: round(after), ratio: round(after / before) }];
  }),
);
const result = {
  ...summary,
  serverMs,
  serverUnderHalfMs,
  ...floor,
  inProcessUs,
  promptTokens,
  exchanges: EXCHANGES,
  runs: RUNS,
};
if (json) process.stdout.write(`${JSON.stringify(result)}\n`);
else {
  const label: Record<Case, string> = {
    pickMs: 'seed shape (6,000-token system prompt seen before + 2,000 new)',
    repeatMs: 'same chat repeated',
    uniqueMs: 'all 8,000 tokens new',
  };
  let text = `kvroute epp, one ext_proc exchange over loopback gRPC, ${promptTokens}-token chat, median of ${RUNS} runs x ${EXCHANGES}\n`;
  for (const c of cases) {
    text += `  ${label[c].padEnd(64)} p50 ${summary[c].p50} ms, p99 ${summary[c].p99} ms; the picker's own share ${serverMs[c]} ms\n`;
  }
  if (floor !== null) {
    text += `  ${'the same exchanges, gRPC alone (bench/eppFloor.ts)'.padEnd(64)} p50 ${floor.floorMs.p50} ms, p99 ${floor.floorMs.p99} ms; the picker adds ${floor.pickOverFloorMs} ms\n`;
    if (floor.floorCpuMs) {
      text += `  CPU of one floor exchange: the client ${floor.floorCpuMs.client} ms, the stand-in ${floor.floorCpuMs.server} ms\n`;
    }
  }
  text += `  the picker's share at most 0.5 ms in ${cases.map((c) => `${c} ${Math.round(serverUnderHalfMs[c] * 100)} %`).join(', ')}\n`;
  text += '  (targets: seed shape p50 <= 1 ms, its picker share <= 0.5 ms)\n';
  for (const [name, t] of Object.entries(inProcessUs)) {
    text += `  in process, ${name}: ${t.before} -> ${t.after} us an exchange (x${t.ratio})\n`;
  }
  process.stdout.write(text);
}
