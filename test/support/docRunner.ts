/**
 * Runs a guide's shell block as a new user would type it, with what a shared test machine
 * needs changed and nothing else: `npx kvroute` is `node bin/kvroute.js` (the same bin, without
 * npx's start-up), `npm start` is `node bin/kvroute.js serve --port 8080`, every port the block
 * names is mapped to a free one (the same port everywhere in the block), and `/tmp/` is a
 * fresh folder. A line ending in `&` starts a server and waits for its ready line; any other
 * line runs to its end and must exit 0. Servers are stopped by `close()`. Lines run without
 * blocking the event loop, so that several runners (one per block) can go on at once.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './cli.ts';
import { type CodeBlock, commands } from './docs.ts';
import { freePort } from './ports.ts';

/** A ready line: the gateway's, the engine's, the picker's, nats-server's (on stderr). */
const READY = /listening on|ready url=|Server is ready/;
/** Well-known ports a block may name. */
const PORT = /(?<=--port |--health-port |--metrics-port | -p |:)(\d{4})\b/g;

/** curl's output is JSON, and no error. */
export function assertAnswered(results: LineResult[]): void {
  for (const r of results.filter((x) => x.line.startsWith('curl'))) {
    const body = JSON.parse(r.stdout);
    assert.equal(body.error, undefined, `${r.line}: ${r.stdout}`);
  }
}

export interface LineResult {
  line: string;
  stdout: string;
  stderr: string;
}

export class DocRunner {
  readonly #ports = new Map<string, string>();
  readonly #servers: ChildProcess[] = [];
  readonly #tmp = mkdtempSync(join(tmpdir(), 'kvroute-docs-'));

  /** The line as it runs here. */
  async rewrite(line: string): Promise<string> {
    let out = line
      .replace(/^npm start\b(?: --)?/, 'node bin/kvroute.js serve --port 8080')
      .replace(/(^|\s|&&\s*)npx kvroute /g, '$1node bin/kvroute.js ')
      .replaceAll('/tmp/', `${this.#tmp}/`);
    for (const port of new Set(out.match(PORT) ?? [])) {
      if (!this.#ports.has(port)) this.#ports.set(port, String(await freePort()));
    }
    out = out.replace(PORT, (p) => this.#ports.get(p)!);
    return out;
  }

  /** The free port a port the block names was mapped to. */
  port(named: string): string {
    const port = this.#ports.get(named);
    if (port === undefined) throw new Error(`the block names no port ${named}`);
    return port;
  }

  /** The environment of every line: the example script's URL on the mapped 8080. */
  #env(): NodeJS.ProcessEnv {
    const gateway = this.#ports.get('8080');
    return {
      ...process.env,
      ...(gateway && { KVROUTE_URL: `http://127.0.0.1:${gateway}/v1` }),
    };
  }

  /** Runs every command of `block` in order. */
  async run(block: CodeBlock, timeoutMs = 300_000): Promise<LineResult[]> {
    const results: LineResult[] = [];
    for (const raw of commands(block)) {
      const background = raw.endsWith('&');
      const line = await this.rewrite(background ? raw.slice(0, -1).trim() : raw);
      if (background) results.push(await this.#start(raw, line, timeoutMs));
      else {
        const r = await runToEnd(line, timeoutMs, this.#env());
        if (r.status !== 0) {
          throw new Error(`\`${raw}\` (ran as \`${line}\`) exited ${r.status}: ${r.stderr}`);
        }
        results.push({ line: raw, stdout: r.stdout, stderr: r.stderr });
      }
    }
    return results;
  }

  async #start(raw: string, line: string, timeoutMs: number): Promise<LineResult> {
    const child = spawn('bash', ['-c', `exec ${line}`], { cwd: ROOT, env: this.#env() });
    this.#servers.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stdout.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(new Error(`\`${raw}\`: no ready line in ${timeoutMs} ms: ${stdout} ${stderr}`)),
        timeoutMs,
      );
      const seen = () => {
        if (READY.test(stdout) || READY.test(stderr)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on('data', (d: string) => {
        stdout += d;
        seen();
      });
      child.stderr.on('data', (d: string) => {
        stderr += d;
        seen();
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`\`${raw}\` exited ${code} before its ready line: ${stdout} ${stderr}`));
      });
    });
    // Read as the server goes on writing (the gateway prints its fleet after its first line).
    return {
      line: raw,
      get stdout() {
        return stdout;
      },
      get stderr() {
        return stderr;
      },
    };
  }

  /** Stops the servers started (SIGTERM, then SIGKILL after 10 s) and removes the folder. */
  async close(): Promise<void> {
    await Promise.all(
      this.#servers.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}

/** Runs one line with bash to its end (killed after `timeoutMs`, a hang guard). */
function runToEnd(
  line: string,
  timeoutMs: number,
  env: NodeJS.ProcessEnv,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', line], { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (d: string) => (stdout += d));
    child.stderr.on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}
