/**
 * Flow control's acceptance experiment (issue 57), in the simulator: a fleet at a multiple of the
 * load it can carry, two tenants of which one sends most of the traffic, run without and with
 * flow control on the same arrivals (same seed: the same tenant per request), beside the light
 * tenant's traffic alone on the same fleet (its unloaded TTFT).
 *
 * The fleet's carrying rate is the highest arrival rate at which it still meets its SLO (the
 * replica search's verdict, `meetsSlo`, here bisected over the rate at a fixed replica count
 * instead of over the count at a fixed rate), with a TTFT target that scales with each prompt
 * (`ttftSlowdown`), so that short runs' cold prefixes do not decide it.
 */
import type { TenantFlowResult } from '../results/flowTable.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import type { SimulatedRun } from '../results/result.ts';
import type { SimFlowControl, TenantSpec } from './flowControl.ts';
import { type SimConfig, simulate } from './run.ts';

function withRate(base: SimConfig, ratePerS: number): SimConfig {
  if (base.workload.kind !== 'synthetic') {
    throw new Error('flow experiment: a synthetic workload (its rate is what is varied)');
  }
  return { ...base, workload: { ...base.workload, ratePerS } };
}

/**
 * The highest rate in [loPerS, hiPerS] (to `stepPerS`) at which `base` meets its SLO, by
 * bisection (meeting the SLO is taken to be monotone in the rate); `loPerS` if none does.
 */
export function carryingRatePerS(
  base: SimConfig,
  range: { loPerS: number; hiPerS: number; stepPerS: number },
  onProbe?: (ratePerS: number, met: boolean) => void,
): number {
  let lo = range.loPerS;
  let hi = range.hiPerS;
  const meets = (rate: number) => {
    const met = simulate({ ...withRate(base, rate), earlyStop: true }).sloMet === true;
    onProbe?.(rate, met);
    return met;
  };
  if (meets(hi)) return hi;
  while (hi - lo > range.stepPerS) {
    const mid = (lo + hi) / 2;
    if (meets(mid)) lo = mid;
    else hi = mid;
  }
  return lo;
}

export interface FlowExperiment {
  ratePerS: number;
  /** The light tenant's own share of the arrivals, alone on the fleet. */
  alone: SimulatedRun;
  without: SimulatedRun;
  with: SimulatedRun;
}

/**
 * Runs the light tenant alone (at its share of `ratePerS`), then both tenants without and with
 * flow control. `tenants[light]` names the light one. `onWithRequest` sees each request of the
 * run with flow control (its `tenant` and `queueWaitMs` set).
 */
export function runFlowExperiment(
  base: SimConfig,
  ratePerS: number,
  tenants: TenantSpec[],
  lightTenant: string,
  flowControl: SimFlowControl,
  onWithRequest?: (r: RequestRecord) => void,
): FlowExperiment {
  const light = tenants.find((t) => t.name === lightTenant);
  if (light === undefined) throw new Error(`flow experiment: no tenant ${lightTenant}`);
  const share = light.share / tenants.reduce((s, t) => s + t.share, 0);
  const loaded = withRate(base, ratePerS);
  return {
    ratePerS,
    alone: simulate({ ...withRate(base, ratePerS * share), tenants: [{ ...light, share: 1 }] }),
    without: simulate({ ...loaded, tenants }),
    with: simulate({
      ...loaded,
      tenants,
      flowControl,
      ...(onWithRequest && { onRequest: onWithRequest }),
    }),
  };
}

export function tenantOf(run: SimulatedRun, tenant: string): TenantFlowResult {
  const t = run.flow?.tenants.find((x) => x.tenant === tenant);
  if (t === undefined) throw new Error(`flow experiment: run without tenant ${tenant}`);
  return t;
}
