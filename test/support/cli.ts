import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/kvroute.js', import.meta.url));

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `kvroute ARGS` as a user would, in a child process, bounded in time; `env` adds to the
 * environment. stdout and stderr are pipes, never a TTY.
 */
export function runCli(
  args: string[],
  timeoutMs = 300_000,
  env: NodeJS.ProcessEnv = {},
): CliResult {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Starts `kvroute engine ARGS` and waits for its first stdout line (the ready line). */
export async function spawnEngine(
  args: string[],
): Promise<{ child: ChildProcessWithoutNullStreams; readyLine: string }> {
  const child = spawn(process.execPath, [BIN, 'engine', ...args], { cwd: ROOT });
  let out = '';
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    out += chunk;
    if (out.includes('\n')) break;
  }
  return { child, readyLine: out };
}
