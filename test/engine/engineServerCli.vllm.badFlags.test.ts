/**
 * `kvroute engine` with a `vllm serve` command line: a flag that is neither kvroute's nor vLLM's
 * (or a vLLM value out of range) exits 2 with one line naming it. The launch line and the flag
 * translation: engineServerCli.vllm.launch.test.ts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';

function start(args: string[]) {
  const child = spawn(process.execPath, ['bin/kvroute.js', 'engine', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    err += d;
  });
  return { child, stderr: () => err };
}

test("a flag that is neither kvroute's nor vLLM's exits 2 naming it", async () => {
  for (const [args, flag] of [
    [['--nonsense-flag'], '--nonsense-flag'],
    [['-dp', '4'], '--data-parallel-size'],
    [['--kv-events-config', '{"enable_kv_cache_events": true, "publisher": "x"}'], 'publisher'],
    [['--gpu-memory-utilization', '1.5'], '--gpu-memory-utilization'],
    [['--enable-auto-tool-choice'], '--tool-call-parser'],
  ] as const) {
    const { child, stderr } = start([...args, '--port', '0']);
    const [code] = await once(child, 'exit');
    assert.equal(code, 2, stderr());
    assert.equal(stderr().trim().split('\n').length, 1, stderr());
    assert.ok(stderr().includes(flag), stderr());
  }
});
