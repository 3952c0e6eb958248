/**
 * Live calibration accuracy: `kvroute calibrate --url`'s measurement (client-side timings) of an
 * in-process `kvroute engine` at --speedup 2, whose cost model is known, fitted, and compared
 * with that model at every measured point. Reports, per run and as the median of the runs, the
 * worst relative error of the fitted prefill µs/token and decode step, and of MFU and MBU.
 *
 *   npm run bench:calibrate -- [--json] [--runs 3]
 *
 * On an idle machine every point comes within 3 %; the tests assert only what does not depend
 * on the host's speed (test/calibrate/calibrate.live.test.ts).
 */
import { liveProfile, measureLive } from '../src/calibrate/live.ts';
import { startEngineServer } from '../src/engine/server/server.ts';
import { makeReplicaSpec, mixedStepMs, prefillUsPerToken } from '../src/model/index.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:calibrate', {
  json: { type: 'boolean', default: false },
  runs: { type: 'string', default: '3' },
});
const RUNS = Number(values.runs);
const SPEEDUP = 2;

interface Run {
  prefillWorst: number;
  decodeWorst: number;
  mfuError: number;
  mbuError: number;
  skipped: number;
}

async function once(): Promise<Run> {
  const server = await startEngineServer({ host: '127.0.0.1', port: 0, speedup: SPEEDUP });
  try {
    const o = {
      url: server.url,
      model: null,
      apiKey: null,
      budgetTokens: 2048,
      speedup: SPEEDUP,
      budgetS: 120,
      maxBatch: 16,
    };
    const m = await measureLive(o);
    const truth = makeReplicaSpec();
    const profile = liveProfile(m, truth, o);
    const calibrated = makeReplicaSpec({ profile });
    const rel = (got: number, want: number) => Math.abs(got / want - 1);
    let prefillWorst = 0;
    let decodeWorst = 0;
    for (const x of m.observations) {
      const w = x.steps[0]!;
      if (x.kind === 'ttft') {
        const engineUs = (mixedStepMs(truth, w) / w.prefillTokens) * 1e3;
        prefillWorst = Math.max(
          prefillWorst,
          rel(prefillUsPerToken(calibrated, w.prefillTokens), engineUs),
        );
      } else {
        decodeWorst = Math.max(decodeWorst, rel(mixedStepMs(calibrated, w), mixedStepMs(truth, w)));
      }
    }
    const curve = profile.curves[0]!;
    return {
      prefillWorst,
      decodeWorst,
      mfuError: rel(curve.mfuMax, 0.5),
      mbuError: rel(curve.mbu, 0.75),
      skipped: m.skipped.length,
    };
  } finally {
    await server.close();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

const runs: Run[] = [];
for (let i = 0; i < RUNS; i++) runs.push(await once());
const summary = {
  runs,
  median: {
    prefillWorst: median(runs.map((r) => r.prefillWorst)),
    decodeWorst: median(runs.map((r) => r.decodeWorst)),
    mfuError: median(runs.map((r) => r.mfuError)),
    mbuError: median(runs.map((r) => r.mbuError)),
  },
};
if (values.json) console.log(JSON.stringify(summary));
else {
  const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
  for (const [i, r] of runs.entries()) {
    console.log(
      `run ${i + 1}: prefill worst ${pct(r.prefillWorst)}, decode worst ${pct(r.decodeWorst)}, MFU ${pct(r.mfuError)}, MBU ${pct(r.mbuError)}, ${r.skipped} skipped`,
    );
  }
  const m = summary.median;
  console.log(
    `median of ${RUNS}: prefill worst ${pct(m.prefillWorst)}, decode worst ${pct(m.decodeWorst)}, MFU ${pct(m.mfuError)}, MBU ${pct(m.mbuError)}`,
  );
}
