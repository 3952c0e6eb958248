/**
 * Active-active endpoint pickers: `kvroute epp --nats` shares its routing state as
 * `kvroute serve --nats` does (`src/sync/`). Two pickers in this process over the same two
 * simulated engines, a third one a process of its own (`kvroute epp --nats ...`, killed with
 * SIGKILL: no goodbye). The test plays Envoy's ext_proc filter with a real gRPC client
 * (FULL_DUPLEX_STREAMED) and reads each picker's router ledger. Needs Debian's nats-server.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { type EppHandle, startEpp } from '../../src/epp/server.ts';
import type { BackendConfig } from '../../src/serving/backendConfig.ts';
import type { Router } from '../../src/router/index.ts';
import type { SyncConfig } from '../../src/sync/stateSync.ts';
import {
  configFor,
  type EngineServerHandle,
  startEngines,
  waitFor,
} from '../support/gateway.harness.ts';
import { EnvoyStream, envoyClient, httpBody, requestHeaders } from '../support/envoy.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';

const skip = natsServerInstalled()
  ? false
  : 'nats-server is not installed (apt-get install nats-server)';
const BIN = fileURLToPath(new URL('../../bin/kvroute.js', import.meta.url));
const CHAT = '/v1/chat/completions';
const HEARTBEAT_MS = 200;
/**
 * The peer timeout of the picker that watches the killed one. A busy host can hold a process
 * (its heartbeat timer, the NATS server) for a second or more: a shorter timeout drops a live
 * peer. The pickers of the first test never time a peer out.
 */
const PEER_TIMEOUT_MS = 5_000;
const NEVER_MS = 600_000;

/** Queued prompt tokens and in-flight requests over all replicas, as a router counts them. */
function ledger(router: Router): { queued: number; inFlight: number } {
  return router
    .snapshot()
    .replicas.reduce(
      (a, r) => ({ queued: a.queued + r.queuedPromptTokens, inFlight: a.inFlight + r.inFlight }),
      { queued: 0, inFlight: 0 },
    );
}

const routerOf = (epp: EppHandle): Router => epp.pools.first!.router;

function chatBody(seed: number): Buffer {
  const words = Array.from({ length: 300 }, (_, i) => `w${(seed * 7919 + i * 104_729) % 5000}`);
  return Buffer.from(
    JSON.stringify({
      messages: [{ role: 'user', content: words.join(' ') }],
      max_tokens: 4,
      stream: true,
    }),
  );
}

/**
 * Headers and the whole body, the picker's answer to the headers awaited: the request is then
 * in the picker's ledger until the stream ends. Returns the stream (still open).
 */
async function openExchange(address: string, seed: number) {
  const client = envoyClient(address);
  const stream = new EnvoyStream(client);
  stream.send(requestHeaders(CHAT));
  stream.send({ 4: httpBody(chatBody(seed), true) }); // request_body
  const head = await stream.next();
  assert.equal(head?.response, 'request_headers', JSON.stringify(head).slice(0, 300));
  return {
    async close() {
      stream.end();
      await stream.status;
      client.close();
    },
  };
}

/** `--backend` values naming the engines as the in-process pickers name them. */
function backendFlags(backends: readonly BackendConfig[]): string[] {
  return backends.flatMap((b) => [
    '--backend',
    [b.url, b.events && `events=${b.events}`, b.replay && `replay=${b.replay}`]
      .filter(Boolean)
      .join(','),
  ]);
}

describe('active-active pickers over NATS', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  let sync: SyncConfig;
  const pickers: EppHandle[] = [];
  const children: ChildProcess[] = [];

  const startPicker = async (peerTimeoutMs = NEVER_MS): Promise<EppHandle> => {
    const epp = await startEpp(configFor(engines, { nats: { ...sync, peerTimeoutMs } }), {
      port: 0,
      healthPort: null,
      metricsPort: null,
    });
    pickers.push(epp);
    await epp.sync!.ready;
    return epp;
  };

  before(async () => {
    nats = await startNatsServer();
    sync = {
      url: nats.url,
      cluster: 'epp-test',
      heartbeatMs: HEARTBEAT_MS,
      peerTimeoutMs: PEER_TIMEOUT_MS,
      stateEveryMs: 60_000,
    };
    engines = await startEngines(2, { speedup: 50 });
  });

  after(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const p of pickers) await p.close();
    for (const e of engines) await e.close();
    await nats.close();
  });

  test("two pickers see each other's ledger entries, and their releases", async () => {
    const a = await startPicker();
    const b = await startPicker();
    assert.equal(ledger(routerOf(a)).inFlight, 0);
    // Exchanges still open when an assertion fails are closed, so that none outlives the test.
    const open: { close(): Promise<void> }[] = [];
    try {
      open.push(await openExchange(a.address, 1));
      const ownA = ledger(routerOf(a));
      assert.equal(ownA.inFlight, 1, 'A holds its pick');
      assert.ok(ownA.queued > 0);
      await waitFor(() => ledger(routerOf(b)).inFlight === 1, 'B to count the request A picked');
      assert.equal(ledger(routerOf(b)).queued, ownA.queued, 'the same queued prompt tokens');
      assert.ok(routerOf(b).peers().includes(a.sync!.id));

      open.push(await openExchange(b.address, 2));
      await waitFor(() => ledger(routerOf(a)).inFlight === 2, 'A to count the request B picked');
      assert.deepEqual(ledger(routerOf(a)), ledger(routerOf(b)), 'one fleet-wide ledger');

      await open.shift()!.close();
      await waitFor(() => ledger(routerOf(b)).inFlight === 1, "B to see A's release");
      await open.shift()!.close();
      await waitFor(
        () => ledger(routerOf(a)).inFlight === 0 && ledger(routerOf(b)).inFlight === 0,
        'both ledgers to drain',
      );
    } finally {
      for (const exchange of open) await exchange.close();
    }
  });

  test("a killed picker's entries are dropped by its peer at the peer timeout", async () => {
    // A picker of its own that times peers out, so that nothing the first test left counts here.
    const b = await startPicker(PEER_TIMEOUT_MS);
    const before = routerOf(b).peers();
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
        ...backendFlags(configFor(engines).backends),
        '--nats',
        nats.url,
        '--cluster',
        'epp-test',
        '--nats-heartbeat-ms',
        String(HEARTBEAT_MS),
        '--nats-peer-timeout-ms',
        String(PEER_TIMEOUT_MS),
        '--log-level',
        'error',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(child);
    // The first line is the banner; the pipe stays open (a closed one would end the child).
    child.stdout!.setEncoding('utf8');
    let banner = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (chunk: string) => {
        banner += chunk;
        if (banner.includes('\n')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`kvroute epp exited (${code}): ${banner}`)));
    });
    const address = /listening on (\S+)/.exec(banner)?.[1];
    assert.ok(address, banner);
    await waitFor(async () => {
      try {
        await openExchange(address, 3);
        return true;
      } catch {
        return false;
      }
    }, 'the new picker to pick (once its backends are routed)');
    await waitFor(() => ledger(routerOf(b)).inFlight === 1, 'B to count its pick');
    const peer = routerOf(b)
      .peers()
      .find((p) => !before.includes(p));
    assert.ok(peer, 'the new picker is a peer of B');

    const exited = new Promise((resolve) => child.once('exit', resolve));
    // When B last heard the picker's heartbeat, before the kill (its timeout runs from there).
    const heardAgoMs = b.sync!.stats().peers.find((p) => p.id === peer)?.lastSeenAgoMs;
    const killedAt = Date.now();
    assert.ok(heardAgoMs !== undefined, 'B hears the picker beat');
    child.kill('SIGKILL');
    await exited;
    assert.equal(ledger(routerOf(b)).inFlight, 1, 'no goodbye: kept until the timeout');
    await waitFor(
      () => ledger(routerOf(b)).inFlight === 0 && !routerOf(b).peers().includes(peer),
      "the killed picker's entry to go",
      30_000,
    );
    // A lower bound only: the entry lived on until the timeout ran out from the last heartbeat
    // B heard (a later one, still on its way at the kill, only moves the drop later).
    assert.ok(
      Date.now() - killedAt >= PEER_TIMEOUT_MS - heardAgoMs - 1,
      `dropped ${Date.now() - killedAt} ms after the kill, heard ${heardAgoMs} ms before it`,
    );
    assert.equal(ledger(routerOf(b)).queued, 0);
  });
});
