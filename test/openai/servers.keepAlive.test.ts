/**
 * The servers' idle keep-alive outlasts the client pools': the `Keep-Alive` hint says 65 s, so a
 * client closes an idle socket before the server does and never reuses one the server is closing
 * (with node's 5 s default a busy host's bench client got a reset before any response byte).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { IDLE_KEEP_ALIVE_MS } from '../../src/openai/http.ts';
import { startTestEngine } from '../support/engineServerHelpers.ts';

test("the engine's responses tell clients the server's idle keep-alive: 65 s", async () => {
  assert.equal(IDLE_KEEP_ALIVE_MS, 65_000);
  const server = await startTestEngine({});
  try {
    const res = await request(`${server.url}/health`);
    await res.body.text();
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['keep-alive'], 'timeout=65');
  } finally {
    await server.close();
  }
});
