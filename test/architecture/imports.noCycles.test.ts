/**
 * No import circle in `src/`, type-only imports counted: a factory lives apart from the interface
 * its products implement (`router/index/makePrefixIndex.ts`, `scheduler/makeKvPolicy.ts`), so
 * each folder reads from its interfaces down.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { importCircles, importGraph, importsOf } from '../support/importGraph.ts';

test('src/ has no import circle', () => {
  const graph = importGraph('src');
  assert.ok(graph.size > 100, `read ${graph.size} files`);
  const edges = new Map([...graph].map(([file, imports]) => [file, imports.files]));
  const circles = importCircles(edges);
  assert.deepEqual(
    circles.map((c) => c.join(' -> ')),
    [],
    'each circle: break it by moving the shared type or the factory to a file of its own',
  );
});

test('the circle finder finds circles, type-only and self imports included', () => {
  const a = importsOf(
    'src/x/a.ts',
    [
      "import type { B } from './b.ts';",
      "export { c } from '../y/c.js';",
      "// import { no } from './comment.ts';",
      'const s = "import { no } from \'./string.ts\'";',
      "const d = await import('./d.ts');",
      "import { readFileSync } from 'node:fs';",
    ].join('\n'),
  );
  assert.deepEqual(a.files, ['src/x/b.ts', 'src/y/c.ts', 'src/x/d.ts']);
  assert.deepEqual(a.packages, ['node:fs']);
  const edges = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a', 'd']],
    ['d', []],
    ['e', ['e']],
    ['f', ['d', 'outside']],
  ]);
  assert.deepEqual(importCircles(edges), [
    ['a', 'b', 'c', 'a'],
    ['e', 'e'],
  ]);
  assert.deepEqual(
    importCircles(
      new Map([
        ['a', ['b']],
        ['b', []],
      ]),
    ),
    [],
  );
});
