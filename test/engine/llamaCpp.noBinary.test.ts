/**
 * `--runtime llama.cpp` on a machine without llama.cpp's binary: one error line (EngineError
 * ERR_CONFIG) naming the runtime, the platform and the packages it needs. The machine is made
 * binary-less through the loader's seam: node-llama-cpp itself told not to look at its prebuilt
 * packages (what it sees where @node-llama-cpp/<platform> is not installed: its own
 * NoBinaryFoundError), and a module loader that cannot find node-llama-cpp at all.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openLlama } from '../../src/engine/runtime/llamaCpp/load.ts';
import { EngineError } from '../../src/engine/types.ts';

const LINE = new RegExp(
  `^--runtime llama\\.cpp: no llama\\.cpp binary for ${process.platform}-${process.arch} \\((.+)\\); ` +
    `it needs node-llama-cpp 3\\.21\\.1 and its CPU package @node-llama-cpp/${process.platform}-${process.arch}$`,
);

async function refusal(p: Promise<unknown>): Promise<EngineError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof EngineError, `an EngineError, got ${err}`);
    return err;
  }
  assert.fail('llama.cpp loaded');
}

test('no prebuilt binary: node-llama-cpp says NoBinaryFoundError, kvroute one line', async () => {
  const err = await refusal(openLlama({ usePrebuiltBinaries: false }));
  assert.equal(err.code, 'ERR_CONFIG');
  const m = LINE.exec(err.message);
  assert.ok(m, err.message);
  assert.match(m[1]!, /NoBinaryFoundError|binar/i);
  assert.equal(err.message.split('\n').length, 1);
});

test('node-llama-cpp not installed: the loader error in one line', async () => {
  const err = await refusal(
    openLlama({
      importLib: () =>
        Promise.reject(
          new Error(
            "Cannot find package 'node-llama-cpp' imported from /x/load.ts\nDid you mean ...",
          ),
        ),
    }),
  );
  assert.equal(err.code, 'ERR_CONFIG');
  const m = LINE.exec(err.message);
  assert.ok(m, err.message);
  assert.equal(m[1], "Cannot find package 'node-llama-cpp' imported from /x/load.ts");
});
