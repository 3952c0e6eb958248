/**
 * The layers as the imports draw them: the endpoint picker (`src/epp`) and the HTTP gateway
 * (`src/gateway`) both stand on the serving core (`src/serving`), neither on the other, and the
 * serving core on neither; the pure cores (scheduler, KV, router, flow, planner) do no I/O (no
 * sockets, files or processes) and import no shell.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type ImportGraph, importGraph, importsOf } from '../support/importGraph.ts';

interface Rule {
  /** Files under this folder... */
  from: string;
  /** ...import no file under these folders... */
  files: readonly string[];
  /** ...and none of these packages (`fs` and `node:fs` alike). */
  packages: readonly string[];
}

const IO_MODULES = [
  'fs',
  'fs/promises',
  'http',
  'https',
  'http2',
  'net',
  'dgram',
  'tls',
  'child_process',
  'worker_threads',
];
const SHELLS = ['src/serving', 'src/gateway', 'src/epp', 'src/cli', 'src/embedded', 'src/loadgen'];
const CORES = ['src/scheduler', 'src/kv', 'src/router', 'src/flow', 'src/planner'];

const RULES: Rule[] = [
  { from: 'src/epp', files: ['src/gateway'], packages: [] },
  { from: 'src/gateway', files: ['src/epp'], packages: [] },
  { from: 'src/serving', files: ['src/gateway', 'src/epp'], packages: [] },
  ...CORES.map((from) => ({ from, files: SHELLS, packages: IO_MODULES })),
];

const under = (file: string, folder: string) => file.startsWith(`${folder}/`);

/** Each import that breaks a rule, as `file -> what it imports`. */
function violations(graph: ImportGraph, rules: readonly Rule[]): string[] {
  const out: string[] = [];
  for (const [file, imports] of graph) {
    for (const rule of rules.filter((r) => under(file, r.from))) {
      for (const target of imports.files) {
        if (rule.files.some((f) => under(target, f))) out.push(`${file} -> ${target}`);
      }
      for (const pkg of imports.packages) {
        if (rule.packages.includes(pkg.replace(/^node:/, ''))) out.push(`${file} -> ${pkg}`);
      }
    }
  }
  return out;
}

describe('layering', () => {
  const graph = importGraph('src');

  test('every layer named has files', () => {
    for (const folder of ['src/epp', 'src/gateway', 'src/serving', ...CORES]) {
      assert.ok(
        [...graph.keys()].some((f) => under(f, folder)),
        `${folder} has no file`,
      );
    }
  });

  test('epp and gateway stand on the serving core, not on each other; cores do no I/O', () => {
    assert.deepEqual(violations(graph, RULES), []);
  });

  test('a forbidden import is found', () => {
    const fake: ImportGraph = new Map([
      ['src/epp/picker.ts', importsOf('src/epp/picker.ts', "import '../gateway/generate.ts';")],
      ['src/serving/pool.ts', importsOf('src/serving/pool.ts', "import '../router/index.ts';")],
      ['src/router/x.ts', importsOf('src/router/x.ts', "import { readFileSync } from 'fs';")],
      ['src/kv/y.ts', importsOf('src/kv/y.ts', "import type { X } from '../serving/config.ts';")],
      ['src/flow/z.ts', importsOf('src/flow/z.ts', "import { createServer } from 'node:http';")],
    ]);
    assert.deepEqual(violations(fake, RULES), [
      'src/epp/picker.ts -> src/gateway/generate.ts',
      'src/router/x.ts -> fs',
      'src/kv/y.ts -> src/serving/config.ts',
      'src/flow/z.ts -> node:http',
    ]);
  });
});
