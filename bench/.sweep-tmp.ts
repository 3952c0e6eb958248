import { parseSimFlags } from '/work/w-flow-affinity/src/cli/sim.ts';
import { defaultFlowControl } from '/work/w-flow-affinity/src/sim/flowControl.ts';
import { simulate } from '/work/w-flow-affinity/src/sim/run.ts';
function withRate(base: any, ratePerS: number): any { return { ...base, workload: { ...base.workload, ratePerS } }; }
const setup = parseSimFlags(['--workload','seed','--replicas','8','--duration','120','--warmup','20','--seed','1','--slo-ttft-slowdown','1.5','--quiet']);
if (setup === 'help') throw 0;
const tenants = [
  { name: 'heavy', share: 0.8, weight: 1, priorityClass: 'standard' as const },
  { name: 'light', share: 0.2, weight: 1, priorityClass: 'standard' as const },
];
const variants = JSON.parse(process.argv[2]!);
for (const v of variants) {
  const d = defaultFlowControl();
  const fc = { ...d, ...v, saturation: { ...d.saturation, ...(v.saturation ?? {}) } };
  const r = simulate({ ...withRate(setup.base, 31.77), tenants, flowControl: fc });
  const t = r.flow!.tenants;
  console.log(JSON.stringify(v), t.map((x) => `${x.tenant} served ${x.served} 503 ${x.expired} p50 ${Math.round(x.ttftP50Ms)} p99 ${Math.round(x.ttftP99Ms)} (${(x.ttftP99Ms/582).toFixed(2)}x) wait99 ${Math.round(x.queueWaitP99Ms)}`).join(' | '));
}
