/**
 * Tests mirror `src/`: every test file is `test/<folder>/<name>.test.ts`, where `<folder>` is a
 * `src/` folder or one of the few folders for what lives beside `src/` (`bench/`, `deploy/`,
 * `docs/`), or `architecture/` for the rules over the whole of `src/` (layers, import circles). `npm test` runs `test/*\/*.test.ts`, so a test at the root of `test/` or two folders
 * down would never run: both are refused here. Helpers live in `test/support/`, data in
 * `test/fixtures/`; neither holds tests.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../support/cli.ts';

const TEST_DIR = join(ROOT, 'test');
const BESIDE_SRC = ['bench', 'deploy', 'docs', 'architecture'];
const NO_TESTS = ['support', 'fixtures'];

const isDir = (path: string) => statSync(path).isDirectory();
const srcFolders = readdirSync(join(ROOT, 'src')).filter((n) => isDir(join(ROOT, 'src', n)));

/** Every `*.test.ts` under `test/`, as paths relative to `test/`. */
const testFiles = (dir = TEST_DIR, rel = ''): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const relPath = rel === '' ? name : `${rel}/${name}`;
    if (isDir(path)) return testFiles(path, relPath);
    return name.endsWith('.test.ts') ? [relPath] : [];
  });

test('every test file sits one folder down, in a folder named after a src/ folder', () => {
  const files = testFiles();
  assert.ok(files.length > 100, `found ${files.length} test files`);
  const allowed = new Set([...srcFolders, ...BESIDE_SRC]);
  const misplaced = files.filter((f) => {
    const parts = f.split('/');
    return parts.length !== 2 || !allowed.has(parts[0]!);
  });
  assert.deepEqual(misplaced, [], `allowed folders: ${[...allowed].sort().join(', ')}`);
});

test('test/ holds only test folders, support/ and fixtures/', () => {
  const allowed = new Set([...srcFolders, ...BESIDE_SRC, ...NO_TESTS]);
  const stray = readdirSync(TEST_DIR).filter((n) => !allowed.has(n));
  assert.deepEqual(stray, []);
  for (const folder of NO_TESTS) {
    assert.deepEqual(testFiles(join(TEST_DIR, folder)), [], `test/${folder}/ holds no tests`);
  }
});

test("npm test's file pattern is the layout's: test/<folder>/<name>.test.ts", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts.test ?? '';
  assert.match(script, / test\/\*\/\*\.test\.ts$/);
  assert.match(script, /--test-concurrency=2/);
});
