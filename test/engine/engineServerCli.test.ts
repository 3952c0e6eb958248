import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { readFlags } from '../../src/cli/args.ts';
import { FLAGS, readEngineOptions } from '../../src/cli/engine.ts';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { resolveEngineOptions } from '../../src/engine/server/options.ts';

const run = (args: string[]) =>
  spawn(process.execPath, ['bin/kvroute.js', 'engine', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });

test('kvroute engine --port 0 prints one ready line with its URL and stops on SIGTERM', async () => {
  const child = run(['--port', '0', '--speedup', '50', '--served-model-name', 'm']);
  try {
    let out = '';
    child.stdout.setEncoding('utf8');
    for await (const chunk of child.stdout) {
      out += chunk;
      if (out.includes('\n')) break;
    }
    const m =
      /^kvroute engine ready url=(http:\/\/127\.0\.0\.1:(\d+)) model=m events=- replay=-\n$/.exec(
        out,
      );
    assert.ok(m, out);
    assert.notEqual(Number(m[2]), 0);
    const res = await fetch(`${m[1]}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 2 }),
    });
    assert.equal(res.status, 200);
    await res.text();
  } finally {
    child.kill('SIGTERM');
  }
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
});

test('bad flags exit 2 with one line naming the flag', async () => {
  for (const [args, flag] of [
    [['--speedup', '0'], '--speedup'],
    [['--kv-policy', 'lru'], '--kv-policy'],
    [['--kv-events-format', 'json'], '--kv-events-format'],
    [['--kv-replay', 'tcp://*:5558'], '--kv-replay'],
  ] as const) {
    const child = run([...args, '--port', '0']);
    let err = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => {
      err += d;
    });
    const [code] = await once(child, 'exit');
    assert.equal(code, 2, err);
    assert.equal(err.trim().split('\n').length, 1, err);
    assert.ok(err.includes(flag), err);
  }
});

test('the server timeouts and stream limits are flags of kvroute engine', () => {
  const flags = readFlags(
    [
      '--headers-timeout-ms',
      '2500',
      '--request-timeout-ms',
      '9000',
      '--stream-buffer-limit-bytes',
      '65536',
      '--stream-stall-timeout-ms',
      '4000',
    ],
    FLAGS,
    ENGINE_FLAGS,
  );
  assert.notEqual(flags, 'help');
  const resolved = resolveEngineOptions(readEngineOptions(flags as Exclude<typeof flags, 'help'>));
  assert.equal(resolved.headersTimeoutMs, 2500);
  assert.equal(resolved.requestTimeoutMs, 9000);
  assert.deepEqual(resolved.streamLimits, { limitBytes: 65536, stallMs: 4000 });
});
