/**
 * The calibration step of a live comparison on real engines: one engine started as the live
 * stack will start them, measured by `kvroute calibrate --url --step-table` (what a user would
 * run), then stopped. Its profile is what the simulated side models (not the catalog GPU's
 * roofline), and the decode cost read from its step table is what the gateway's `delay-cost`
 * is told (`kvroute serve --decode-cost-tokens`), as `npm run bench:real` does.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { readProfile } from '../calibrate/profileFile.ts';
import type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';
import type { EngineOptions } from '../engine/options.ts';
import type { CostProfile } from '../model/calibration.ts';
import { decodeCostTokensOf } from '../model/stepTable.ts';
import { engineArgs, readyLine, spawnKvroute, stopChild } from './stack.ts';

export interface CalibrateLiveOptions {
  engine: EngineOptions;
  real: RealEngines;
  /** Wall-clock seconds for the measurements (calibrate's --budget-s). */
  budgetS: number;
  /** The workload's longest prompt: the probes then cover the contexts the run's chunks see. */
  maxPromptTokens: number;
  /** Folder the profile file is written to. */
  dir: string;
}

export interface CalibratedEngine {
  /** The profile file (`--profile FILE` on kvroute sim reproduces the simulated side). */
  path: string;
  profile: CostProfile;
  /** What one running decode costs, in prompt tokens of a step at the engine's budget. */
  decodeCostTokens: number;
}

export function calibrateArgs(o: CalibrateLiveOptions, url: string, out: string): string[] {
  return [
    'calibrate',
    '--url',
    url,
    '--step-table',
    // Catalog names only label the fitted curve; the step table's times do not depend on them.
    '--catalog-model',
    o.engine.model,
    '--gpu',
    o.engine.gpu,
    '--tp',
    String(o.engine.tp),
    '--budget',
    String(o.engine.budgetTokens),
    '--budget-s',
    String(o.budgetS),
    '--max-prompt-tokens',
    String(o.maxPromptTokens),
    '--max-batch',
    String(o.engine.maxSeqs),
    '--repeats',
    '3',
    '--out',
    out,
    '--quiet',
  ];
}

export async function calibrateLiveEngine(o: CalibrateLiveOptions): Promise<CalibratedEngine> {
  const path = join(o.dir, 'profile.yaml');
  const engine = spawnKvroute(engineArgs(o.engine, 1, 0, o.real));
  try {
    const line = await readyLine(engine, /^kvroute engine ready (.*)$/);
    const url = /url=(\S+)/.exec(line)?.[1];
    if (url === undefined) throw new Error(`calibration engine: no url in "${line}"`);
    await exitOk(spawnKvroute(calibrateArgs(o, url, path)), 'kvroute calibrate');
  } finally {
    await stopChild(engine);
  }
  const profile = readProfile(path);
  const table = profile.curves.find((c) => c.tp === o.engine.tp)?.table;
  const decodeCostTokens = table ? decodeCostTokensOf(table, o.engine.budgetTokens) : 0;
  return { path, profile, decodeCostTokens };
}

/** Resolves when the child exits with 0; rejects with the end of its stderr otherwise. */
function exitOk(child: ChildProcess, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let err = '';
    child.stdout!.resume();
    child.stderr!.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-2000);
    });
    child.once('exit', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${what} exited with ${code ?? signal}: ${err.trim().slice(-500)}`));
    });
  });
}
