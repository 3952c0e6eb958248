/**
 * A real llama.cpp `llama-server` for tests and benches: the prebuilt CPU binary
 * (shared/tools/llama-server/, or `KVROUTE_LLAMA_SERVER_TARBALL`) extracted once per machine to
 * os.tmpdir(), started on a free port with the tiny model. `findLlamaServer` says why it cannot
 * run (no tarball, extraction failed, the binary dies on this processor) instead of throwing, so
 * a test can skip with that reason.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DEFAULT_TARBALL = fileURLToPath(
  new URL('../../../shared/tools/llama-server/llama-server-82bb485-bin.tar.xz', import.meta.url),
);

export type LlamaServerBinary =
  | { ok: true; bin: string; libDir: string }
  | { ok: false; why: string };

/** The extracted binary, or why there is none. */
export function findLlamaServer(
  tarball = process.env.KVROUTE_LLAMA_SERVER_TARBALL ?? DEFAULT_TARBALL,
): LlamaServerBinary {
  if (!existsSync(tarball)) return { ok: false, why: `no llama-server tarball at ${tarball}` };
  const stamp = `${statSync(tarball).size}-${Math.round(statSync(tarball).mtimeMs)}`;
  const dir = join(tmpdir(), `kvroute-llama-server-${stamp}`);
  const bin = join(dir, 'bin', 'llama-server');
  const libDir = join(dir, 'bin');
  if (!existsSync(bin)) {
    // Extract beside, then rename: a directory that exists is whole.
    const part = `${dir}.part-${process.pid}`;
    rmSync(part, { recursive: true, force: true });
    mkdirSync(part, { recursive: true });
    const tar = spawnSync('tar', ['-xJf', tarball, '-C', part], { encoding: 'utf8' });
    if (tar.status !== 0) {
      rmSync(part, { recursive: true, force: true });
      return { ok: false, why: `cannot extract ${tarball}: ${tar.stderr || tar.error?.message}` };
    }
    try {
      renameSync(part, dir);
    } catch {
      rmSync(part, { recursive: true, force: true }); // another process got there first
    }
  }
  const version = spawnSync(bin, ['--version'], {
    encoding: 'utf8',
    env: { ...process.env, LD_LIBRARY_PATH: libDir },
    timeout: 20_000,
  });
  if (version.status !== 0) {
    const why = version.signal ? `killed by ${version.signal}` : `exit ${version.status}`;
    return { ok: false, why: `llama-server does not run here (${why}): ${version.stderr.trim()}` };
  }
  return { ok: true, bin, libDir };
}

export interface LlamaServerOptions {
  model: string;
  slots?: number;
  contextTokens?: number;
  /** `--cache-ram` in MiB; absent: llama-server's default (its host prompt cache on). */
  cacheRamMiB?: number;
}

export interface LlamaServerHandle {
  url: string;
  /** What it printed, for a failure's message. */
  log: () => string;
  close: () => Promise<void>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  return port;
}

/** Starts one llama-server and waits for `/health` to answer 200 (the model loaded). */
export async function startLlamaServer(
  binary: Extract<LlamaServerBinary, { ok: true }>,
  opts: LlamaServerOptions,
): Promise<LlamaServerHandle> {
  const port = await freePort();
  const args = [
    '-m',
    opts.model,
    '-t',
    '1',
    '-np',
    String(opts.slots ?? 4),
    '-c',
    String(opts.contextTokens ?? 16384),
    '--metrics',
    '--slots',
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    ...(opts.cacheRamMiB !== undefined ? ['--cache-ram', String(opts.cacheRamMiB)] : []),
  ];
  const child = spawn(binary.bin, args, {
    env: { ...process.env, LD_LIBRARY_PATH: binary.libDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (b: Buffer) => {
    out = (out + b.toString('utf8')).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited: string | null = null;
  const gone = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = signal ?? `exit ${code}`;
      resolve();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const close = async () => {
    if (exited === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited !== null) throw new Error(`llama-server ended (${exited}):\n${out.slice(-2000)}`);
    if (Date.now() > deadline) {
      await close();
      throw new Error(`llama-server not healthy within 60 s:\n${out.slice(-2000)}`);
    }
    try {
      const res = await fetch(`${url}/health`);
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { url, log: () => out, close };
}
