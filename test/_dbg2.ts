import { parseSimFlags } from '../src/cli/sim.ts';
import { simulateAudited } from '../src/sim/audit.ts';
const p = parseSimFlags(['--replicas','4','--warmup','0', ...process.argv.slice(2)]) as any;
const base = { ...p.base, router: { ...p.base.router, policy: p.policies[0]! } };
const r = simulateAudited(base, p.auditFaults ?? { replicas: [] }, (process.env.KIND ?? 'audit-on') as 'audit-on');
console.log(JSON.stringify({ judged: r.audit.judged, ch: r.audit.verdictChanges, fa: r.audit.falseAlarms, rep: r.audit.repairs, det: r.audit.detection }), r.run.hitRate);
