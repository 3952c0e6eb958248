/**
 * `kvroute model tiny` as a user runs it: a file llama.cpp's own GGUF parser reads, the default
 * tokenizer (Llama 3's), and one error line naming the flag for each bad value or path (exit 2).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { readGgufFileInfo } from 'node-llama-cpp';
import { runCli } from '../support/cli.ts';
import { writeTinyTokenizerFolder } from '../support/tinyTokenizer.ts';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-cli-model-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const tokenizer = writeTinyTokenizerFolder(join(dir, 'tok'), { bosStep: false });
const SMALL = ['--layers', '1', '--dim', '64', '--ffn', '128', '--context', '256'];

/** Exit 2, nothing on stdout, one stderr line that names `flag`. */
function assertOneLine(args: string[], flag: RegExp) {
  const out = runCli(['model', ...args]);
  assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
  assert.equal(out.stdout, '');
  const lines = out.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, out.stderr);
  assert.match(lines[0]!, /^kvroute model: /);
  assert.match(lines[0]!, flag);
}

test('writes a file that parses, with the default tokenizer (Llama 3) and the given shape', async () => {
  const out = join(dir, 'default-tokenizer.gguf');
  const r = runCli(['model', 'tiny', '--out', out, ...SMALL, '--seed', '3'], 300_000);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
  assert.match(r.stdout, new RegExp(`^wrote ${out} \\(\\d+\\.\\d MB\\)\\n$`));
  const info = await readGgufFileInfo(out, { logWarnings: false });
  assert.equal(info.metadata.general.architecture, 'llama');
  assert.equal(info.metadata.tokenizer.ggml.tokens.length, 128_256);
  assert.equal(info.architectureMetadata.block_count, 1);
  assert.equal(info.architectureMetadata.embedding_length, 64);
  assert.ok(statSync(out).size > 128_256 * 64 * 2);
});

test('--help, and no kind, print the usage', () => {
  for (const [args, status] of [
    [['--help'], 0],
    [['tiny', '--help'], 0],
    [[], 2],
  ] as const) {
    const r = runCli(['model', ...args]);
    assert.equal(r.status, status);
    assert.match(r.stdout, /^usage: kvroute model tiny --out FILE\.gguf/);
  }
});

test('bad flag values: one line naming the flag', () => {
  const base = ['tiny', '--out', join(dir, 'x.gguf'), '--tokenizer', tokenizer];
  assertOneLine(['big'], /unknown model 'big'; models: tiny/);
  assertOneLine(['tiny', '--tokenizer', tokenizer], /--out FILE\.gguf is required/);
  assertOneLine([...base, '--dim', 'wide'], /--dim must be an integer, got 'wide'/);
  assertOneLine([...base, '--layers', '0'], /--layers must be at least 1, got 0/);
  assertOneLine([...base, '--layers', '65'], /--layers must be at most 64/);
  assertOneLine([...base, '--heads', '3'], /--dim 256 must be a multiple of --heads 3/);
  assertOneLine([...base, '--kv-heads', '3'], /--heads 4 must be a multiple of --kv-heads 3/);
  assertOneLine([...base, '--seed', '-1'], /--seed must be at least 0, got -1/);
  assertOneLine([...base, '--context', '1.5'], /--context must be an integer/);
  assertOneLine([...base, '--bogus', '1'], /--bogus/);
});

test('an unwritable --out, or an unusable --tokenizer: one line naming it', () => {
  const file = join(dir, 'a-file');
  writeFileSync(file, '');
  assertOneLine(
    ['tiny', '--out', join(file, 'x.gguf'), '--tokenizer', tokenizer],
    /--out .*a-file\/x\.gguf: cannot write \(ENOTDIR\)/,
  );
  assertOneLine(
    ['tiny', '--out', join(dir, 'no-such-dir', 'x.gguf'), '--tokenizer', tokenizer],
    /--out .*: cannot write \(ENOENT\)/,
  );
  assertOneLine(
    ['tiny', '--out', join(dir, 'y.gguf'), '--tokenizer', join(dir, 'none')],
    /--tokenizer/,
  );
});
