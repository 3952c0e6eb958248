/**
 * The generated spans of docs/configuration.md, by name: `<!-- options:NAME -->` holds the
 * table made here. test/docs/docs.reference.test.ts checks each; `writeDocs.ts` rewrites them.
 */
import { BENCH_OPTIONS } from './bench.ts';
import { CALIBRATE_OPTIONS } from './calibrate.ts';
import { PLAN_OPTIONS } from './plan.ts';
import { PLAN_FLEET_OPTIONS } from './planFleet.ts';
import { DEMO_OPTIONS } from './demo.ts';
import { configDocOf, flagsDocOf } from './docs.ts';
import { ENGINE_SERVER_OPTIONS } from './engine.ts';
import { EPP_OPTIONS } from './epp.ts';
import { SERVE_OPTIONS } from './serve.ts';
import { SIM_OPTIONS } from './sim.ts';

export const DOC_SPANS: Readonly<Record<string, () => string>> = {
  'serve-config': () => configDocOf(SERVE_OPTIONS),
  serve: () => flagsDocOf(SERVE_OPTIONS),
  engine: () => flagsDocOf(ENGINE_SERVER_OPTIONS),
  epp: () => flagsDocOf(EPP_OPTIONS),
  bench: () => flagsDocOf(BENCH_OPTIONS),
  sim: () => flagsDocOf(SIM_OPTIONS),
  calibrate: () => flagsDocOf(CALIBRATE_OPTIONS),
  plan: () => flagsDocOf(PLAN_OPTIONS),
  'plan-search-fleet': () => flagsDocOf(PLAN_FLEET_OPTIONS),
  demo: () => flagsDocOf(DEMO_OPTIONS),
};
