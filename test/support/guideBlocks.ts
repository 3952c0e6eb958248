/**
 * The guides' first command blocks as tests (test/docs/docs.commands.guide*.test.ts): each runs
 * as a new user would type it (test/support/docRunner.ts), each line exits 0, each curl gets an
 * answer in vLLM's shape. The blocks are spread over several files by subject
 * (`SERVER_GUIDE_PARTS` for the blocks that start servers, `RUN_GUIDE_PARTS` for those that only
 * run commands to their end): the test runner runs files side by side, not the tests of one file,
 * so one file holding every block would outlast the others on a 2-core host. A guide no part
 * names runs in the `rest` part of its kind, so a new guide is never left out.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertAnswered, DocRunner } from './docRunner.ts';
import { commands, guidePaths, readDoc } from './docs.ts';

/** A guide whose first block starts a server (a line ending in `&`). */
export const startsServer = (path: string): boolean =>
  commands(readDoc(path).blocks[0]!).some((line) => line.endsWith('&'));

/**
 * The guides whose first block starts servers, by the part (the file
 * `docs.commands.guideServers.<part>.test.ts`) that runs them.
 */
export const SERVER_GUIDE_PARTS = {
  /** A gateway and a load run against it. */
  bench: ['docs/benchmarks.md'],
  /** Simulated engines, alone and behind a gateway. */
  engines: ['docs/engine.md', 'docs/engines.md'],
  /** The tiny model on llama.cpp. */
  realEngine: ['docs/real-engine.md'],
  /** A gateway on KV events; a gateway with API keys. */
  gateway: ['docs/routing.md', 'docs/security.md'],
  /** The endpoint picker. */
  epp: ['docs/kubernetes.md'],
} as const satisfies Record<string, readonly string[]>;

/**
 * The guides whose first block starts no server, by the part (the file
 * `docs.commands.guideRuns.<part>.test.ts`) that runs them.
 */
export const RUN_GUIDE_PARTS = {
  /** Fleet simulations (`kvroute sim`), the longest blocks. */
  sims: ['docs/flow-control.md', 'docs/nats.md', 'docs/simulator.md'],
} as const satisfies Record<string, readonly string[]>;

export type ServerGuidePart = keyof typeof SERVER_GUIDE_PARTS | 'rest';
export type RunGuidePart = keyof typeof RUN_GUIDE_PARTS | 'rest';

/** The guides of one part of `parts`; `rest`: those of their kind that no part names. */
function partOf(parts: Record<string, readonly string[]>, kind: string[], part: string): string[] {
  const named = new Set<string>(Object.values(parts).flat());
  if (part === 'rest') return kind.filter((p) => !named.has(p));
  return kind.filter((p) => parts[part]!.includes(p));
}

/** The server guides of one part; `rest`: those that no part names. */
export function serverGuides(part: ServerGuidePart): string[] {
  return partOf(SERVER_GUIDE_PARTS, guidePaths().filter(startsServer), part);
}

/** The guides whose first block starts no server, of one part; `rest`: those no part names. */
export function runGuides(part: RunGuidePart): string[] {
  return partOf(
    RUN_GUIDE_PARTS,
    guidePaths().filter((p) => !startsServer(p)),
    part,
  );
}

/** One test per guide: its first block runs; at once when `concurrency` (own ports, own /tmp). */
export function guideBlockTests(title: string, paths: string[], concurrency: boolean): void {
  describe(title, { concurrency }, () => {
    for (const path of paths) {
      test(path, async () => {
        const block = readDoc(path).blocks[0]!;
        const runner = new DocRunner();
        try {
          const results = await runner.run(block);
          assert.ok(results.length > 0);
          assertAnswered(results);
        } finally {
          await runner.close();
        }
      });
    }
  });
}
