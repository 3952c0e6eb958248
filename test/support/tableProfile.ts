/**
 * A cost profile holding one step table, as `kvroute calibrate --step-table` writes it, for tests
 * of how a table reaches the cost model: a TP-1 Llama-3.1-8B curve whose roofline terms the table
 * overrides. `curve` replaces any of the curve's fields (the GPU is in `measuredOn`).
 */
import { type CostProfile, PROFILE_FORMAT } from '../../src/model/index.ts';

export function tableProfile(
  table: Record<string, unknown>,
  o: { gpu?: string; curve?: Record<string, unknown> } = {},
): CostProfile {
  return {
    format: PROFILE_FORMAT,
    source: 'live http://127.0.0.1:1',
    method: 'test',
    measuredOn: {
      model: 'llama-3.1-8b',
      gpu: o.gpu ?? 'h200',
      weightsDtype: 'bf16',
      kvDtype: 'bf16',
    },
    curves: [
      {
        tp: 1,
        mfuMax: 0.01,
        halfTokens: 10,
        mbu: 0.01,
        overheadMs: 1,
        requestOverheadMs: 0,
        fixed: [],
        objective: 'least-squares',
        maxErrorPct: 0,
        rmsErrorPct: 0,
        rooflineMaxErrorPct: 0,
        points: [],
        ...o.curve,
        table: { requestOverheadMs: 0, fixed: [], maxErrorPct: 0, rmsErrorPct: 0, ...table },
      },
    ],
  } as unknown as CostProfile;
}
