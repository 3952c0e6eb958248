/** Shared helpers for the engine server tests (not a test file itself). */
import OpenAI from 'openai';
import {
  type EngineServerHandle,
  type EngineServerOptions,
  startEngineServer,
} from '../../src/engine/server/server.ts';

/** A server on 127.0.0.1 port 0, fast by default. */
export function startTestEngine(options: EngineServerOptions = {}): Promise<EngineServerHandle> {
  return startEngineServer({ host: '127.0.0.1', port: 0, speedup: 100, ...options });
}

export function clientFor(server: EngineServerHandle): OpenAI {
  return new OpenAI({
    baseURL: `${server.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: 120_000,
  });
}

/** Prometheus text format -> `name{labels}` -> value (labels as printed). */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    out.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

/** The sample of `name` whose labels include `labels` (a substring like 'le="0.5"'). */
export function metric(samples: Map<string, number>, name: string, labels = ''): number {
  for (const [key, value] of samples) {
    if (key === name || (key.startsWith(`${name}{`) && key.includes(labels))) return value;
  }
  throw new Error(`no metric ${name} ${labels}`);
}

export async function scrape(server: EngineServerHandle): Promise<Map<string, number>> {
  const res = await fetch(`${server.url}/metrics`);
  return parseMetrics(await res.text());
}

/** Polls `check` every 10 ms until it is true or `timeoutMs` passes (then throws). */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Deterministic filler text of roughly `words` words. */
export function filler(words: number, seed = 1): string {
  const vocab = ['alpha', 'beta', 'gamma', 'delta', 'kv', 'cache', 'route', 'block', 'token'];
  let s = seed;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    out.push(vocab[s % vocab.length]!);
  }
  return out.join(' ');
}
