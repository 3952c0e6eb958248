/**
 * What `bench/gateway.ts` and `bench/gatewayAb.ts` share: child servers (each a process of its
 * own, stopped by `stopChildren`), the instant backend, closed-loop load over undici, and a
 * process's CPU time read from /proc (so a gateway's cost per request is measured apart from the
 * load generator's and whatever else the machine runs).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { Pool } from 'undici';

export const BODY = JSON.stringify({
  model: 'llama-3.3-70b',
  prompt: 'Hello there',
  max_tokens: 4,
  stream: true,
});

const children: ChildProcess[] = [];

/** Starts a child and resolves with the first stdout line matching `ready`. */
export function startChild(
  cmd: string,
  args: string[],
  ready: RegExp,
): Promise<{ match: RegExpExecArray; child: ChildProcess }> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(
      () => reject(new Error(`${cmd} not ready in 60 s: ${out}${err}`)),
      60_000,
    );
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ match: m, child });
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${cmd} exited with ${code}: ${err}`));
    });
  });
}

/** A child started elsewhere, stopped with the rest. */
export function track(child: ChildProcess): ChildProcess {
  children.push(child);
  return child;
}

/** Every child still running gets SIGTERM. */
export function stopChildren(): void {
  for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
}

/** A backend that answers every POST at once with a short SSE stream. */
export const INSTANT_BACKEND = `
import { createServer } from 'node:http';
const events = [' Hi', ' there', '!'].map((t, i) => 'data: ' + JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'instant', choices: [{ index: 0, text: t, logprobs: null, finish_reason: i === 2 ? 'length' : null }] }) + '\\n\\n').join('') + 'data: [DONE]\\n\\n';
const metrics = 'vllm:kv_cache_usage_perc 0\\nvllm:num_requests_running 0\\nvllm:num_requests_waiting 0\\n';
const server = createServer((req, res) => {
  if (req.method === 'GET') { res.end(req.url === '/metrics' ? metrics : ''); return; }
  req.resume();
  req.on('end', () => { res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }); res.end(events); });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () => console.log('ready http://127.0.0.1:' + server.address().port));
`;

/**
 * The least a Node HTTP proxy does: read the body, forward it over keep-alive connections to
 * the backends named by its arguments, in turn, stream the answer back. No parsing, tokenizing
 * or routing.
 */
export const PASS_THROUGH_PROXY = `
import { Agent, createServer, request } from 'node:http';
const targets = process.argv.slice(1).map((url) => new URL(url));
let turn = 0;
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const server = createServer({ keepAlive: true }, (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const headers = { 'content-type': 'application/json', 'content-length': body.length };
    const target = targets[turn++ % targets.length];
    const up = request({ host: target.hostname, port: target.port, path: req.url, method: 'POST', agent, headers }, (ur) => {
      res.writeHead(ur.statusCode, { 'content-type': ur.headers['content-type'] });
      ur.on('data', (c) => res.write(c));
      ur.on('end', () => res.end());
    });
    up.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log('ready http://127.0.0.1:' + server.address().port));
`;

/** `count` instant backends, each a process; their URLs. */
export async function startInstantBackends(count: number): Promise<string[]> {
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const { match } = await startChild(
      process.execPath,
      ['--input-type=module', '-e', INSTANT_BACKEND],
      /ready (\S+)/,
    );
    urls.push(match[1]!);
  }
  return urls;
}

/** One streaming request, body read to the end; resolves with its latency in ms. */
export async function oneRequest(pool: Pool): Promise<number> {
  const t0 = performance.now();
  const { statusCode, body } = await pool.request({
    path: '/v1/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: BODY,
  });
  await body.dump({ limit: Number.POSITIVE_INFINITY });
  if (statusCode !== 200) throw new Error(`status ${statusCode}`);
  return performance.now() - t0;
}

/** Open loop at a fixed rate: requests start on schedule whether or not earlier ones ended. */
export async function openLoop(url: string, ratePerS: number, seconds: number): Promise<number[]> {
  const pool = new Pool(url, { connections: 256, pipelining: 1 });
  const latencies: number[] = [];
  const inFlight: Promise<void>[] = [];
  let errors = 0;
  const total = Math.round(ratePerS * seconds);
  const start = performance.now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * ratePerS) + 1);
    for (; sent < due; sent++) {
      inFlight.push(
        oneRequest(pool).then(
          (ms) => void latencies.push(ms),
          () => void errors++,
        ),
      );
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inFlight);
  await pool.close();
  if (errors > 0) throw new Error(`${errors} requests failed against ${url}`);
  return latencies;
}

/** Closed loop: `concurrency` workers, each sending its next request when the last ended. */
export async function closedLoop(
  url: string,
  concurrency: number,
  seconds: number,
): Promise<{ done: number; requestsPerS: number }> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  let done = 0;
  let errors = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        try {
          await oneRequest(pool);
          done++;
        } catch {
          errors++;
        }
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  await pool.close();
  if (errors > done / 100)
    throw new Error(`${errors} of ${done + errors} requests failed against ${url}`);
  return { done, requestsPerS: done / elapsedS };
}

/**
 * CPU seconds a process has run so far, all its threads (Linux /proc: each thread's schedstat,
 * in ns), or null elsewhere.
 */
export function cpuSecondsOf(pid: number): number | null {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // The thread ended between the listing and the read.
      }
    }
    return ns / 1e9;
  } catch {
    return null;
  }
}

export { median } from './ab.ts';
