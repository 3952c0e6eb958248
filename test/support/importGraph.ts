/**
 * The import graph of `src/` as the layering and circle tests read it: every module a file names
 * (static and dynamic imports, `export ... from`, type-only imports included), relative ones
 * resolved to the file they name. TypeScript's own scanner (`preProcessFile`) finds them, so an
 * import inside a comment or a string is not one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { ROOT } from './cli.ts';

/** File (relative to the checkout, `src/router/router.ts`) -> the modules it names. */
export type ImportGraph = Map<string, ModuleImports>;

export interface ModuleImports {
  /** Project files named by a relative specifier, relative to the checkout. */
  files: string[];
  /** Everything else: packages and Node's modules (`node:fs`, `undici`). */
  packages: string[];
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

/** The imports of one file's text, `file` relative to the checkout. */
export function importsOf(file: string, text: string): ModuleImports {
  const files: string[] = [];
  const packages: string[] = [];
  for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
    if (fileName.startsWith('./') || fileName.startsWith('../')) {
      const target = resolve(ROOT, dirname(file), fileName).replace(/\.js$/, '.ts');
      files.push(relative(ROOT, target));
    } else packages.push(fileName);
  }
  return { files, packages };
}

/** The graph of every `.ts` file under `dir` (relative to the checkout). */
export function importGraph(dir = 'src'): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const path of sourceFiles(join(ROOT, dir)).sort()) {
    const file = relative(ROOT, path);
    graph.set(file, importsOf(file, readFileSync(path, 'utf8')));
  }
  return graph;
}

/**
 * Every import circle, each as the files around it (the first repeated at the end), one per
 * strongly connected set of files (Tarjan's algorithm); a file importing itself is one too.
 */
export function importCircles(edges: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!edges.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      set.push(w);
    } while (w !== v);
    if (set.length > 1 || edges.get(v)!.includes(v))
      circles.push(circleThrough(v, new Set(set), edges));
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return circles;
}

/** One circle from `start` back to it inside `set` (a breadth-first walk): the path to print. */
function circleThrough(
  start: string,
  set: ReadonlySet<string>,
  edges: ReadonlyMap<string, readonly string[]>,
): string[] {
  const from = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i]!;
    for (const w of edges.get(v) ?? []) {
      if (!set.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let u: string | undefined = v; u !== undefined && u !== start; u = from.get(u)) {
          path.splice(1, 0, u);
        }
        return [...path, start];
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start, start];
}
