/**
 * A live stack for comparisons and the demo: N simulated engines and the gateway in front of
 * them, as child processes (`kvroute engine`, `kvroute serve`: what a user would run) or in
 * this process (fast to start, for tests). Engines publish KV events on free loopback ports
 * and the gateway subscribes. Every child started is tracked, so `killAll` can end them on
 * Ctrl-C and nothing is left behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';
import type { EngineOptions } from '../engine/options.ts';
import { startEmbeddedFleet } from '../embedded/fleet.ts';
import { defaultConfig } from '../serving/config.ts';
import { startGateway } from '../gateway/gateway.ts';

export interface StackOptions {
  replicas: number;
  policy: string;
  /** The engines' modeled time / wall time. */
  speedup: number;
  engine: EngineOptions;
  mode: 'process' | 'inprocess';
  /** Gateway scrape interval, wall ms. */
  scrapeMs?: number;
  /** Real engines (the llama.cpp runtime) instead of simulated ones. */
  real?: RealEngines | null;
  /** The gateway's `--decode-cost-tokens` / `--engine-budget` (delay-cost's decode term). */
  decodeCost?: { tokens: number; budgetTokens: number };
}

export interface LiveStack {
  /** The gateway's base URL. */
  url: string;
  close(): Promise<void>;
}

const BIN = fileURLToPath(new URL('../../bin/kvroute.js', import.meta.url));
const READY_TIMEOUT_MS = 60_000;
const children = new Set<ChildProcess>();

/** `kvroute engine` flags for one engine with the simulator's engine options. */
export function engineArgs(
  engine: EngineOptions,
  speedup: number,
  seed: number,
  real: RealEngines | null = null,
): string[] {
  return [
    'engine',
    '--port',
    '0',
    ...(real === null
      ? ['--speedup', String(speedup)]
      : [
          '--runtime',
          'llama.cpp',
          '--gguf',
          real.gguf,
          '--threads',
          String(real.threads),
          ...(real.maxModelLen === undefined ? [] : ['--max-model-len', String(real.maxModelLen)]),
        ]),
    '--model',
    engine.model,
    '--gpu',
    engine.gpu,
    '--tp',
    String(engine.tp),
    '--budget',
    String(engine.budgetTokens),
    '--max-seqs',
    String(engine.maxSeqs),
    '--kv-policy',
    engine.kvPolicy,
    '--block-size',
    String(engine.blockSize),
    ...(engine.kvBlocks === undefined ? [] : ['--kv-blocks', String(engine.kvBlocks)]),
    '--kv-events',
    'tcp://127.0.0.1:*',
    '--kv-replay',
    'tcp://127.0.0.1:*',
    '--seed',
    String(seed),
  ];
}

export async function startStack(o: StackOptions): Promise<LiveStack> {
  return o.mode === 'process' ? startProcessStack(o) : startInProcessStack(o);
}

async function startInProcessStack(o: StackOptions): Promise<LiveStack> {
  const real = o.real ?? null;
  const fleet = await startEmbeddedFleet({
    replicas: o.replicas,
    ...(real === null && { speedup: o.speedup }),
    engine: real ? { ...o.engine, ...realEngineOptions(real) } : o.engine,
  });
  try {
    const gateway = await startGateway({
      ...defaultConfig(),
      port: 0,
      backends: fleet.backends,
      policy: o.policy,
      blockSize: o.engine.blockSize,
      ...(o.scrapeMs !== undefined && { scrapeMs: o.scrapeMs }),
      ...(real?.gatewayTokenizer && { tokenizer: real.gatewayTokenizer }),
      ...(o.decodeCost && { decodeCost: o.decodeCost }),
    });
    return {
      url: gateway.url,
      async close() {
        await gateway.close();
        await fleet.close();
      },
    };
  } catch (err) {
    await fleet.close();
    throw err;
  }
}

async function startProcessStack(o: StackOptions): Promise<LiveStack> {
  const started: ChildProcess[] = [];
  const stop = () => Promise.all(started.map(stopChild)).then(() => undefined);
  try {
    const ready = await Promise.all(
      Array.from({ length: o.replicas }, async (_, i) => {
        const child = spawnKvroute(engineArgs(o.engine, o.speedup, i, o.real ?? null));
        started.push(child);
        const line = await readyLine(child, /^kvroute engine ready (.*)$/);
        const field = (name: string) => new RegExp(`${name}=(\\S+)`).exec(line)?.[1] ?? '-';
        return { url: field('url'), events: field('events'), replay: field('replay') };
      }),
    );
    const backendFlags = ready.flatMap((e) => [
      '--backend',
      [
        e.url,
        ...(e.events !== '-' ? [`events=${e.events}`] : []),
        ...(e.replay !== '-' ? [`replay=${e.replay}`] : []),
      ].join(','),
    ]);
    const gateway = spawnKvroute([
      'serve',
      '--port',
      '0',
      '--policy',
      o.policy,
      '--block-size',
      String(o.engine.blockSize),
      ...(o.scrapeMs !== undefined ? ['--scrape-ms', String(o.scrapeMs)] : []),
      ...(o.real?.gatewayTokenizer ? ['--tokenizer', o.real.gatewayTokenizer] : []),
      ...(o.decodeCost
        ? [
            '--decode-cost-tokens',
            String(o.decodeCost.tokens),
            '--engine-budget',
            String(o.decodeCost.budgetTokens),
          ]
        : []),
      ...backendFlags,
    ]);
    started.push(gateway);
    const line = await readyLine(gateway, /^kvroute serve listening on (\S+)/);
    const url = /listening on (\S+)/.exec(line)![1]!;
    return { url, close: stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Engine server options for real engines (their tokenizer is the model file's). */
export function realEngineOptions(real: RealEngines) {
  return {
    runtime: 'llama.cpp' as const,
    llamaCpp: { gguf: real.gguf, threads: real.threads },
    ...(real.maxModelLen !== undefined && { maxModelLen: real.maxModelLen }),
  };
}

/** Starts `kvroute ARGS` as a child process, tracked for `killAll`. */
export function spawnKvroute(args: string[]): ChildProcess {
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Resolves with the first stdout line matching `pattern`; rejects if the child exits first. */
export function readyLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    let settled = false;
    const settle = () => {
      settled = true;
      clearTimeout(timer);
      child.stdout!.off('data', onOut);
      child.stdout!.resume(); // keep draining, so the child never blocks on a full pipe
    };
    const fail = (why: string) => {
      if (settled) return;
      settle();
      reject(new Error(`${why} waiting for ${pattern.source}: ${err.trim().slice(-500)}`));
    };
    const onOut = (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => pattern.test(l));
      if (line === undefined) return;
      settle();
      resolve(line);
    };
    const timer = setTimeout(() => fail('timed out'), READY_TIMEOUT_MS);
    child.stderr!.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-4000);
    });
    child.stdout!.on('data', onOut);
    child.once('exit', (code) => fail(`exited with ${code}`));
  });
}

/** SIGTERM, then SIGKILL if it has not exited within 5 s. */
export function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Ends every child this process started (Ctrl-C in the demo). */
export function killAll(): Promise<void> {
  return Promise.all([...children].map(stopChild)).then(() => undefined);
}
