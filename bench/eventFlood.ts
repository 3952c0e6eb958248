/**
 * The gateway's log under a KV event garbage flood: `node --import tsx bench/eventFlood.ts
 * [--seconds S] [--json]`.
 *
 * A gateway in this process (its JSON log counted line by line, level info) with one backend
 * (a stub answering /health, /metrics, /v1/models) whose events endpoint is a PUB socket here.
 * For S seconds (default 10) the PUB sends as fast as it can: random 64-bit sequence numbers
 * (half of them go back: a "restart" each), payloads alternately a valid batch and bytes that
 * are not msgpack. Reported: batches sent, log lines and bytes in the S seconds, and both scaled
 * to a minute; the lines by message. One run: the figure is a count, not a speed.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Publisher } from 'zeromq';
import { defaultConfig } from '../src/serving/config.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { makeLogger } from '../src/serving/log.ts';
import { encodeEventBatch, encodeSeq } from '../src/kv/wire.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('eventFlood', {
  seconds: { type: 'string' },
  json: { type: 'boolean' },
});
const SECONDS = benchFlags('eventFlood').positiveNumber('seconds', values.seconds, 10);
const json = values.json === true;

const byMessage = new Map<string, number>();
let lines = 0;
let bytes = 0;
const destination = new Writable({
  write(chunk, _enc, done) {
    for (const line of String(chunk).split('\n')) {
      if (line === '') continue;
      lines++;
      bytes += Buffer.byteLength(line) + 1;
      const msg = (JSON.parse(line) as { msg: string }).msg.slice(0, 60);
      byMessage.set(msg, (byMessage.get(msg) ?? 0) + 1);
    }
    done();
  },
});

const backend = createServer((req, res) => {
  if (req.url === '/metrics') return void res.end('vllm:num_requests_running 0\n');
  if (req.url === '/v1/models') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return void res.end('{"object":"list","data":[{"id":"fake","object":"model","parent":null}]}');
  }
  res.end();
});
await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
const pub = new Publisher({ linger: 0, sendHighWaterMark: 1_000_000 });
await pub.bind('tcp://127.0.0.1:*');
const gw = await startGateway(
  {
    ...defaultConfig(),
    port: 0,
    backends: [{ url, events: pub.lastEndpoint!, replay: null, model: 'fake', apiKey: null }],
  },
  { logger: makeLogger({ level: 'info', destination, pretty: false }) },
);
// Let the SUB connect, then count only the flood's lines.
const valid = encodeEventBatch([{ type: 'AllBlocksCleared' }], { tsS: 1 });
for (let i = 0; i < 50 && gw.router.snapshot().replicas[0]!.lastEventAtMs === null; i++) {
  await pub.send([Buffer.alloc(0), encodeSeq(0n), valid]);
  await new Promise((r) => setTimeout(r, 20));
}
lines = 0;
bytes = 0;
byMessage.clear();

const garbage = Buffer.from('\xc1 not msgpack at all', 'latin1');
let x = 0x9e3779b97f4a7c15n;
let sent = 0;
const endAt = performance.now() + SECONDS * 1000;
while (performance.now() < endAt) {
  x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  await pub.send([Buffer.alloc(0), encodeSeq(x >> 1n), sent % 2 === 0 ? valid : garbage]);
  sent++;
  if (sent % 1000 === 0) await new Promise((r) => setImmediate(r));
}
await new Promise((r) => setTimeout(r, 500));
const perMinute = 60 / SECONDS;
const result = {
  seconds: SECONDS,
  batchesSent: sent,
  logLines: lines,
  logBytes: bytes,
  logLinesPerMinute: Math.round(lines * perMinute),
  logBytesPerMinute: Math.round(bytes * perMinute),
  byMessage: Object.fromEntries(byMessage),
};
await gw.close();
pub.close();
backend.close();
if (json) console.log(JSON.stringify(result));
else {
  console.log(`KV event garbage flood, ${SECONDS} s: ${sent} batches sent`);
  console.log(
    `log: ${lines} lines, ${bytes} bytes; per minute: ${result.logLinesPerMinute} lines, ${result.logBytesPerMinute} bytes`,
  );
  for (const [msg, n] of byMessage) console.log(`  ${String(n).padStart(6)}  ${msg}`);
}
