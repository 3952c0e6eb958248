/**
 * A `nats-server` of the tests' own on a free loopback port (Debian's package; `.ci/run`
 * installs it when missing). `stop` kills it, `start` brings it back on the same port (and the
 * same JetStream store), for tests of a NATS outage.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.ts';

export interface NatsServer {
  url: string;
  port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stops it and removes its store. */
  close(): Promise<void>;
}

/** Whether `nats-server` is on PATH (the tests that need it say so and skip when not). */
export function natsServerInstalled(): boolean {
  return spawnSync('nats-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export async function startNatsServer(
  options: { jetstream?: boolean; args?: string[] } = {},
): Promise<NatsServer> {
  const port = await freePort();
  const store = mkdtempSync(join(tmpdir(), 'kvroute-nats-'));
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
    const args = ['-a', '127.0.0.1', '-p', String(port)];
    if (options.jetstream) args.push('-js', '-sd', store);
    // More of nats-server's flags (credentials: --user U --pass P, --auth TOKEN).
    args.push(...(options.args ?? []));
    const proc = spawn('nats-server', args, { stdio: 'ignore' });
    child = proc;
    let exited = false;
    proc.once('exit', () => {
      exited = true;
    });
    for (let i = 0; i < 200; i++) {
      if (exited) throw new Error(`nats-server exited at start (port ${port})`);
      if (await accepts(port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    proc.kill('SIGKILL');
    throw new Error(`nats-server did not accept on port ${port} within 10 s`);
  };
  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc === null || proc.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGKILL');
    await gone;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    start,
    stop,
    async close() {
      await stop();
      rmSync(store, { recursive: true, force: true });
    },
  };
}
