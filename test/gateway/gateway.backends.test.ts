/**
 * Backends that come and go: the admin API (`/router/backends`) adds a backend, which starts cold
 * and takes traffic once scraped, and removes one, which drains; under a steady load no request
 * is lost. A config reload does the same from a file, in process and on SIGHUP.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { backendOf } from '../../src/embedded/fleet.ts';
import type { BackendInfo } from '../../src/serving/pool.ts';
import {
  complete,
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';

const ADMIN = 'sk-admin';
const asAdmin = { authorization: `Bearer ${ADMIN}` };
const hostOf = (e: EngineServerHandle): string => new URL(e.url).host;

async function backends(base: string, headers: Record<string, string> = asAdmin) {
  const res = await fetch(`${base}/router/backends`, { headers });
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: BackendInfo[] }).data;
}

function admin(base: string, method: 'POST' | 'DELETE', query = '', body?: unknown, key = ADMIN) {
  return fetch(`${base}/router/backends${query}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

describe('the admin API needs the admin key', () => {
  let engines: EngineServerHandle[] = [];
  let withKey: GatewayHandle;
  let withoutKey: GatewayHandle;
  before(async () => {
    engines = await startEngines(1, { speedup: 50 });
    withKey = await startGatewayFor(engines, {
      adminKey: ADMIN,
      apiKeys: [{ key: 'sk-c', tenant: 'c' }],
    });
    withoutKey = await startGatewayFor(engines);
  });
  after(async () => {
    await withKey?.close();
    await withoutKey?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('no key, a wrong key and a client key are refused; the admin key is not', async () => {
    const entry = { url: 'http://127.0.0.1:9' };
    const none = await fetch(`${withKey.url}/router/backends`, {
      method: 'POST',
      body: JSON.stringify(entry),
    });
    assert.equal(none.status, 401);
    assert.equal((await admin(withKey.url, 'POST', '', entry, 'sk-wrong')).status, 401);
    const client = await admin(withKey.url, 'DELETE', '?url=http://127.0.0.1:9', undefined, 'sk-c');
    assert.equal(client.status, 403);
    assert.equal((await fetch(`${withKey.url}/router/backends`)).status, 401);
    assert.equal((await backends(withKey.url)).length, 1);
  });

  test('without --admin-key, backends cannot be changed at all', async () => {
    const res = await admin(withoutKey.url, 'POST', '', { url: 'http://127.0.0.1:9' }, 'anything');
    assert.equal(res.status, 403);
    const json = (await res.json()) as { error: { type: string; message: string } };
    assert.equal(json.error.type, 'PermissionDeniedError');
    assert.match(json.error.message, /--admin-key/);
    // Reading follows /router/replicas: open when no key of any kind is set.
    assert.equal((await backends(withoutKey.url, {})).length, 1);
  });

  test('bad entries, duplicates and unknown backends are OpenAI-shaped errors', async () => {
    const bad = await admin(withKey.url, 'POST', '', { url: 'ftp://x', events: 5 });
    assert.equal(bad.status, 400);
    const badJson = (await bad.json()) as { error: { param: string; code: number } };
    assert.equal(badJson.error.param, 'backend.url');
    assert.equal(badJson.error.code, 400);
    const dup = await admin(withKey.url, 'POST', '', { url: engines[0]!.url });
    assert.equal(dup.status, 409);
    assert.equal(((await dup.json()) as { error: { type: string } }).error.type, 'ConflictError');
    const missing = await admin(withKey.url, 'DELETE', '?url=http://127.0.0.1:9');
    assert.equal(missing.status, 404);
    assert.equal((await admin(withKey.url, 'DELETE')).status, 400);
    const put = await fetch(`${withKey.url}/router/backends`, { method: 'PUT', headers: asAdmin });
    assert.equal(put.status, 405);
    assert.equal(put.headers.get('allow'), 'GET, POST, DELETE');
  });
});

describe('adding and removing a backend under load', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(3, { speedup: 20 });
    gw = await startGatewayFor(engines.slice(0, 2), { adminKey: ADMIN });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('every request sent is answered; a drained backend gets nothing new', async () => {
    const [leaving, staying, joining] = engines as [
      EngineServerHandle,
      EngineServerHandle,
      EngineServerHandle,
    ];
    let sent = 0;
    let answered = 0;
    const failures: string[] = [];
    const servedBy = new Map<string, number>();
    /** Requests sent after the removal was acknowledged that still went to the removed one. */
    let afterRemovalOnLeaving = 0;
    let removed = false;
    let stop = false;
    const LIMIT = 600;
    const worker = async (w: number) => {
      for (let i = 0; !stop && sent < LIMIT; i++) {
        sent++;
        const sentAfterRemoval = removed;
        // Cold prompts, so the cost policy spreads them by load and a new backend gets its share.
        const r = await complete(gw.url, { prompt: tokens(w * 100_000 + i, 128), max_tokens: 12 });
        if (r.status !== 200) {
          failures.push(`${r.status} ${r.text.slice(0, 200)}`);
          continue;
        }
        answered++;
        const replica = r.replica ?? '?';
        servedBy.set(replica, (servedBy.get(replica) ?? 0) + 1);
        if (sentAfterRemoval && replica === hostOf(leaving)) afterRemovalOnLeaving++;
      }
    };
    const load = Promise.all(Array.from({ length: 4 }, (_, w) => worker(w)));
    try {
      await waitFor(() => answered >= 10, 'the load to run');

      const add = await admin(gw.url, 'POST', '', {
        url: joining.url,
        events: joining.eventsEndpoint,
        replay: joining.replayEndpoint,
      });
      assert.equal(add.status, 202);
      const added = ((await add.json()) as { backend: BackendInfo }).backend;
      assert.equal(added.state, 'starting');
      await waitFor(
        async () =>
          (await backends(gw.url)).find((b) => b.name === hostOf(joining))?.state === 'active',
        'the new backend to become active',
      );
      await waitFor(() => (servedBy.get(hostOf(joining)) ?? 0) > 0, 'the new backend to serve');

      const del = await admin(gw.url, 'DELETE', `?url=${encodeURIComponent(leaving.url)}`);
      assert.equal(del.status, 202);
      removed = true;
      assert.equal(((await del.json()) as { backend: BackendInfo }).backend.state, 'draining');
      await waitFor(
        async () => !(await backends(gw.url)).some((b) => b.name === hostOf(leaving)),
        'the removed backend to drain',
      );
      // Drained: it can go away without any request noticing.
      await leaving.close();
      const mark = answered;
      await waitFor(() => answered >= mark + 20, 'the load to go on after the removal');
    } finally {
      stop = true;
      await within(120_000, load, 'the load');
    }
    assert.deepEqual(failures, []);
    assert.equal(answered, sent);
    // A drain needs no retry: nothing in flight was cut.
    assert.equal((await gw.metrics.retries.get()).values[0]?.value ?? 0, 0);
    assert.equal(afterRemovalOnLeaving, 0);
    assert.ok((servedBy.get(hostOf(staying)) ?? 0) > 0);
    const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as { data: unknown[] };
    assert.equal(models.data.length, 1);
  });
});

describe('config reload', () => {
  let engines: EngineServerHandle[] = [];
  let dir: string;
  before(async () => {
    engines = await startEngines(2, { speedup: 50 });
    dir = await mkdtemp(join(tmpdir(), 'kvroute-reload-'));
  });
  after(async () => {
    await Promise.all(engines.map((e) => e.close()));
    await rm(dir, { recursive: true, force: true });
  });

  test('in process: backends diffed, keys applied live, the rest named for a restart', async () => {
    const [first, second] = engines as [EngineServerHandle, EngineServerHandle];
    const config = configFor([first]);
    const gw = await startGatewayFor([first]);
    try {
      const result = gw.reload({
        ...config,
        backends: [backendOf(second)],
        apiKeys: [{ key: 'sk-new', tenant: 't' }],
        policy: 'random',
      });
      assert.deepEqual(result.added, [second.url]);
      assert.deepEqual(result.removed, [first.url]);
      assert.ok(result.applied.includes('api-keys'));
      assert.deepEqual(result.needsRestart, ['policy']);
      assert.equal((await complete(gw.url, { prompt: 'hi', max_tokens: 1 })).status, 401);
      const auth = { authorization: 'Bearer sk-new' };
      await waitFor(
        async () =>
          (await complete(gw.url, { prompt: 'hi', max_tokens: 1 }, auth)).replica ===
          hostOf(second),
        'the new backend to serve',
      );
      await waitFor(() => !gw.backends().some((b) => b.name === hostOf(first)), 'the drain');
    } finally {
      await gw.close();
    }
  });

  test('in process: a reload that swaps every backend loses no request', async () => {
    const [first, second] = engines as [EngineServerHandle, EngineServerHandle];
    const gw = await startGatewayFor([first]);
    let sent = 0;
    const failures: string[] = [];
    let stop = false;
    const worker = async (w: number) => {
      for (let i = 0; !stop && i < 400; i++) {
        sent++;
        const r = await complete(gw.url, { prompt: tokens(w * 10_000 + i, 64), max_tokens: 4 });
        if (r.status !== 200) failures.push(`${r.status} ${r.text.slice(0, 200)}`);
      }
    };
    const load = Promise.all([worker(1), worker(2)]);
    try {
      await waitFor(() => sent >= 5, 'the load to run');
      const result = gw.reload({ ...configFor([second]), port: 0 });
      assert.deepEqual(result.removed, [first.url]);
      await waitFor(
        () =>
          gw
            .backends()
            .map((b) => `${b.name} ${b.state}`)
            .join() === `${hostOf(second)} active`,
        'the swap',
      );
      const mark = sent;
      await waitFor(() => sent >= mark + 5, 'the load to go on');
    } finally {
      stop = true;
      await within(120_000, load, 'the load');
      await gw.close();
    }
    assert.deepEqual(failures, []);
  });

  test('kvroute serve reads its --config again on SIGHUP; a bad or empty file keeps the running one', async () => {
    const [first, second] = engines as [EngineServerHandle, EngineServerHandle];
    const path = join(dir, 'kvroute.yaml');
    const entry = (e: EngineServerHandle) =>
      `  - { url: ${e.url}, events: ${e.eventsEndpoint}, replay: ${e.replayEndpoint} }\n`;
    await writeFile(path, `backends:\n${entry(first)}`);
    const child = spawnServe(['--config', path, '--port', '0', '--log-level', 'info']);
    try {
      const base = await child.url;
      assert.deepEqual(
        (await backends(base, {})).map((b) => b.name),
        [hostOf(first)],
      );
      await writeFile(path, `backends:\n${entry(second)}`);
      child.proc.kill('SIGHUP');
      await waitFor(async () => {
        const now = await backends(base, {});
        return now.length === 1 && now[0]!.name === hostOf(second) && now[0]!.state === 'active';
      }, 'the reloaded backend set');
      await waitFor(() => child.stderr().includes('"why":"SIGHUP"'), 'the SIGHUP log line');

      // An empty file (a save caught between its truncate and its write) drains nothing.
      await writeFile(path, '');
      child.proc.kill('SIGHUP');
      await waitFor(
        () => child.stderr().includes('config not reloaded: the file is empty'),
        'the empty-file line',
      );
      assert.deepEqual(
        (await backends(base, {})).map((b) => b.name),
        [hostOf(second)],
      );

      await writeFile(path, 'backends: [\n');
      child.proc.kill('SIGHUP');
      await waitFor(
        () => child.stderr().includes('config not reloaded: the file is invalid'),
        'the error line',
      );
      assert.deepEqual(
        (await backends(base, {})).map((b) => b.name),
        [hostOf(second)],
      );
      const r = await complete(base, { prompt: tokens(1, 32), max_tokens: 2 });
      assert.equal(r.status, 200, r.text);
    } finally {
      await child.stop();
    }
  });
});

const BIN = fileURLToPath(new URL('../../bin/kvroute.js', import.meta.url));

/** `kvroute serve ARGS` as a child process; `url` resolves when it says where it listens. */
function spawnServe(args: string[]) {
  const proc: ChildProcess = spawn(process.execPath, [BIN, 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const url = new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    });
    proc.once('exit', (code) => reject(new Error(`serve exited (${code}): ${err}`)));
  });
  return {
    proc,
    url: within(120_000, url, 'kvroute serve to start'),
    stderr: () => err,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await within(120_000, exited, 'kvroute serve to stop');
    },
  };
}
