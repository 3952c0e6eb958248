/**
 * The picker's memory with idle connections: `node --import tsx bench/eppIdle.ts [--conns N]
 * [--runs N] [--json]`.
 *
 * `kvroute epp` as a process of its own (embedded fleet of one engine, health and metrics ports
 * off the way), and N raw TCP connections to its ext_proc port from this process, half of them
 * sending only the HTTP/2 preface and an empty SETTINGS frame, the other half nothing. Its
 * resident set (VmRSS of /proc/PID/status) is read before the connections, once they are all
 * open, and again after its idle limit has closed them (every connection seen closed by this
 * side, then 1 s), with the connections the picker still holds (`ss`). The same with no idle limit (`--grpc-idle-ms` and `--grpc-keepalive-ms` at
 * an hour: what the picker did before it had limits), read after the same wait. Each figure is
 * the median over RUNS runs, in MB.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

const argValue = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
};
const CONNS = argValue('--conns', 2_000);
const RUNS = argValue('--runs', 3);
const json = process.argv.includes('--json');
const IDLE_MS = 5_000;
const BATCH = 100;
const HOUR_MS = 3_600_000;
const BIN = fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));
const PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 0x04, 0, 0, 0, 0, 0]),
]);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssMb = (pid: number): number => {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
};

async function startPicker(
  idleMs: number,
  keepaliveMs: number,
): Promise<{
  child: ChildProcess;
  port: number;
}> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      'epp',
      '--port',
      '0',
      '--health-port',
      '0',
      '--metrics-port',
      '0',
      '--replicas',
      '1',
      '--log-level',
      'error',
      '--grpc-idle-ms',
      String(idleMs),
      '--grpc-keepalive-ms',
      String(keepaliveMs),
      '--grpc-keepalive-timeout-ms',
      String(Math.min(keepaliveMs, 1_000)),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8');
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk: string) => {
      out += chunk;
      const m = /listening on [^\s]+:(\d+) /.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', () => reject(new Error(`kvroute epp did not start: ${out}`)));
  });
  return { child, port };
}

interface Round {
  baselineMb: number;
  openMb: number;
  afterMb: number;
  closedByServer: number;
  /** Established connections at the picker's port (ss), all open and after the wait. */
  heldOpen: number;
  heldAfter: number;
}

/** Established TCP connections whose local port is `port` (the picker's side). */
function heldBy(port: number): number {
  const out = execFileSync('ss', ['-Htn', 'state', 'established', `sport = :${port}`]);
  return out
    .toString()
    .split('\n')
    .filter((l) => l.trim() !== '').length;
}

async function round(idleMs: number, keepaliveMs: number): Promise<Round> {
  const { child, port } = await startPicker(idleMs, keepaliveMs);
  try {
    await sleep(1_000);
    const baselineMb = rssMb(child.pid!);
    let closed = 0;
    const sockets: Socket[] = [];
    // In batches: a burst of 2,000 SYNs overflows the accept queue, and connections the picker
    // never accepted would count as held.
    for (let i = 0; i < CONNS; i += BATCH) {
      const opened: Promise<void>[] = [];
      for (let j = i; j < Math.min(CONNS, i + BATCH); j++) {
        const s = connect(port, '127.0.0.1');
        s.on('data', () => {});
        s.on('error', () => {});
        s.on('close', () => closed++);
        opened.push(new Promise((r) => s.once('connect', () => r())));
        if (j % 2 === 0) s.write(PREFACE);
        sockets.push(s);
      }
      await Promise.all(opened);
      await sleep(20);
    }
    await sleep(200);
    const openMb = rssMb(child.pid!);
    const heldOpen = heldBy(port);
    // Past the idle limit (and the keepalive): every connection closed, or the wait is over.
    const waitUntil = performance.now() + IDLE_MS * 4 + 5_000;
    while (closed < CONNS && performance.now() < waitUntil) await sleep(100);
    await sleep(1_000);
    const afterMb = rssMb(child.pid!);
    const heldAfter = heldBy(port);
    for (const s of sockets) s.destroy();
    return { baselineMb, openMb, afterMb, closedByServer: closed, heldOpen, heldAfter };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const summary = (rounds: Round[]) => ({
  baselineMb: +median(rounds.map((r) => r.baselineMb)).toFixed(1),
  openMb: +median(rounds.map((r) => r.openMb)).toFixed(1),
  afterMb: +median(rounds.map((r) => r.afterMb)).toFixed(1),
  closedByServer: median(rounds.map((r) => r.closedByServer)),
  heldOpen: median(rounds.map((r) => r.heldOpen)),
  heldAfter: median(rounds.map((r) => r.heldAfter)),
});

const limited: Round[] = [];
const unlimited: Round[] = [];
for (let i = 0; i < RUNS; i++) {
  limited.push(await round(IDLE_MS, 2_000));
  unlimited.push(await round(HOUR_MS, HOUR_MS));
}
const result = {
  connections: CONNS,
  runs: RUNS,
  idleLimitMs: IDLE_MS,
  withIdleLimit: summary(limited),
  withoutLimit: summary(unlimited),
};
if (json) console.log(JSON.stringify(result));
else {
  const row = (name: string, r: ReturnType<typeof summary>) =>
    `${name.padEnd(16)} baseline ${r.baselineMb} MB, ${r.heldOpen} open ${r.openMb} MB, after the wait ${r.afterMb} MB with ${r.heldAfter} still held (${r.closedByServer} closed by the picker)`;
  console.log(
    `kvroute epp RSS, ${CONNS} idle connections (half sent only the HTTP/2 preface), median of ${RUNS}`,
  );
  console.log(row(`idle ${IDLE_MS} ms`, result.withIdleLimit));
  console.log(row('no idle limit', result.withoutLimit));
}
