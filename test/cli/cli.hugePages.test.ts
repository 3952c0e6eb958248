/**
 * A llama.cpp command runs on huge pages (src/cli/hugePages.ts): which commands start themselves
 * again with glibc's tunable, and that the serving child follows its parent: the tunable in its
 * environment, gone when the parent is killed, exit 0 after SIGTERM through the parent.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { hugePagesOnOffer, wantsHugePages } from '../../src/cli/hugePages.ts';
import { tinyModelPath } from '../support/tinyModel.ts';

const on = () => true;
const linux = process.platform === 'linux';

test('only llama.cpp commands want huge pages, once, and only where the kernel offers them', () => {
  const engine = ['engine', '--runtime', 'llama.cpp', '--gguf', 'm.gguf'];
  assert.equal(wantsHugePages(engine, {}, on), linux);
  assert.equal(wantsHugePages(['serve', '--runtime=llama.cpp'], {}, on), linux);
  assert.equal(wantsHugePages(['engine', '--runtime', 'sim'], {}, on), false);
  assert.equal(wantsHugePages(['engine'], {}, on), false);
  // The gguf named llama.cpp is not the runtime.
  assert.equal(wantsHugePages(['engine', '--gguf', 'llama.cpp'], {}, on), false);
  assert.equal(
    wantsHugePages(engine, {}, () => false),
    false,
  );
  // Already on them (the child), or turned off by the user: no second start.
  assert.equal(wantsHugePages(engine, { GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' }, on), false);
  assert.equal(
    wantsHugePages(engine, { GLIBC_TUNABLES: 'glibc.malloc.check=0:glibc.malloc.hugetlb=0' }, on),
    false,
  );
});

/** The pids of `pid`'s children (Linux's /proc). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** Starts `kvroute engine --runtime llama.cpp` on the tiny model; resolves once it is ready. */
async function startEngine(): Promise<ChildProcess> {
  const gguf = await tinyModelPath();
  const parent = spawn(
    process.execPath,
    ['bin/kvroute.js', 'engine', '--runtime', 'llama.cpp', '--gguf', gguf, '--port', '0'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GLIBC_TUNABLES: '' } },
  );
  let out = '';
  await new Promise<void>((resolve, reject) => {
    parent.stdout!.on('data', (b: Buffer) => {
      out += b;
      if (out.includes('kvroute engine ready')) resolve();
    });
    parent.on('exit', (code) => reject(new Error(`engine exited ${code} before ready: ${out}`)));
  });
  return parent;
}

test('the engine runs in a child on the tunable, which dies with its parent', {
  skip: !linux || !hugePagesOnOffer() ? 'no transparent huge pages here' : false,
}, async () => {
  const parent = await startEngine();
  const [child] = childrenOf(parent.pid!);
  assert.ok(child !== undefined, 'the parent started the serving child');
  const env = readFileSync(`/proc/${child}/environ`, 'utf8').split('\0');
  assert.ok(env.includes('GLIBC_TUNABLES=glibc.malloc.hugetlb=1'), env.join(' '));
  parent.kill('SIGKILL');
  // The child notices at its next event-loop turn; bounded wait (20 s).
  for (let i = 0; i < 200 && alive(child); i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(alive(child), false, 'the child outlived its killed parent');
});

test('SIGTERM to the parent drains the child, and the parent exits as the child did', {
  skip: !linux || !hugePagesOnOffer() ? 'no transparent huge pages here' : false,
}, async () => {
  const parent = await startEngine();
  const [child] = childrenOf(parent.pid!);
  const exited = new Promise<[number | null, string | null]>((resolve) =>
    parent.on('exit', (code, signal) => resolve([code, signal])),
  );
  parent.kill('SIGTERM');
  assert.deepEqual(await exited, [0, null]);
  assert.equal(alive(child!), false);
});
