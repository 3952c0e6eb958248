/**
 * The demo's calibration step on real engines: `kvroute calibrate` is asked, with flags its
 * --help names, to measure the engine as the live stack runs it (budget, sequences, catalog
 * names of the simulated side) and to write the profile where the demo reads it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import { calibrateArgs } from '../../src/loadgen/calibrateLive.ts';
import { runCli } from '../support/cli.ts';
import { flagsIn } from '../support/docs.ts';

const engine = { ...ENGINE_DEFAULTS, budgetTokens: 512, maxSeqs: 4, kvBlocks: 256 };
const args = calibrateArgs(
  {
    engine,
    real: { gguf: 'tiny.gguf', threads: 1, gatewayTokenizer: null },
    budgetS: 30,
    maxPromptTokens: 1152,
    dir: '/tmp/x',
  },
  'http://127.0.0.1:9',
  '/tmp/x/profile.yaml',
);
const argAfter = (flag: string) => args[args.indexOf(flag) + 1];

test('the step table of the engine the stack runs: its budget, its sequences, its catalog names', () => {
  assert.equal(args[0], 'calibrate');
  assert.ok(args.includes('--step-table'));
  assert.equal(argAfter('--url'), 'http://127.0.0.1:9');
  assert.equal(argAfter('--budget'), '512');
  assert.equal(argAfter('--max-batch'), '4');
  assert.equal(argAfter('--max-prompt-tokens'), '1152');
  assert.equal(argAfter('--budget-s'), '30');
  assert.equal(argAfter('--catalog-model'), engine.model);
  assert.equal(argAfter('--gpu'), engine.gpu);
  assert.equal(argAfter('--tp'), String(engine.tp));
  assert.equal(argAfter('--out'), '/tmp/x/profile.yaml');
});

test('every flag it passes is one kvroute calibrate --help names', () => {
  const help = runCli(['calibrate', '--help']);
  assert.equal(help.status, 0, help.stderr);
  const named = flagsIn(help.stdout);
  for (const flag of args.filter((a) => a.startsWith('--'))) {
    assert.ok(named.has(flag), `${flag} in kvroute calibrate --help`);
  }
});
