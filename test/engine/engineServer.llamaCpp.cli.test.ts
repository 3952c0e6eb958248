/**
 * `kvroute engine --runtime llama.cpp` as a user starts it: a missing, cut-off or foreign GGUF,
 * or a missing --gguf, is one error line naming the file or the flag (exit 2). The other parts: engineServer.llamaCpp.*.test.ts; the shared prompt and
 * helpers: test/support/llamaEngine.ts.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { tinyModelPath } from '../support/tinyModel.ts';

function runCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/kvroute.js', 'engine', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

test('a missing, cut-off or foreign GGUF gets one error line naming the file (exit 2)', async () => {
  const dir = tmpdir();
  const cut = join(dir, `kvroute-cut-${process.pid}.gguf`);
  writeFileSync(cut, Buffer.from('GGUF\x03\x00\x00\x00\x01\x00', 'latin1'));
  const foreign = join(dir, `kvroute-foreign-${process.pid}.gguf`);
  writeFileSync(foreign, 'not a model at all');
  for (const [file, why] of [
    [join(dir, 'kvroute-no-such-model.gguf'), /no such file/],
    [cut, /ends inside its header/],
    [foreign, /not a GGUF file/],
  ] as const) {
    const r = await runCli(['--runtime', 'llama.cpp', '--gguf', file, '--port', '0']);
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.includes(`--gguf ${file}`), lines[0]);
    assert.match(lines[0]!, why);
  }
  const none = await runCli(['--runtime', 'llama.cpp', '--port', '0']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /--runtime llama.cpp needs --gguf FILE/);
  const gguf = await tinyModelPath();
  const sim = await runCli(['--gguf', gguf, '--port', '0']);
  assert.equal(sim.code, 2);
  assert.match(sim.stderr, /--gguf needs --runtime llama.cpp/);
});
