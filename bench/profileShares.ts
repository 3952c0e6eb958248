/**
 * A V8 CPU profile's busy time split by who spent it, within a time window: kvroute's own code
 * by source folder, each dependency, node's internals, the few native calls that matter (the
 * kernel's socket writes above all), the collector. Used by bench/gatewayProfile.ts to say how
 * much of a gateway's CPU its own request path is, against what any Node proxy pays.
 */
import { readFileSync } from 'node:fs';

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string } }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The group a sample's top frame belongs to. */
function groupOf(functionName: string, url: string): string {
  if (url === '') {
    // (idle), (garbage collector), (program), or a native function such as writev.
    return functionName.startsWith('(') ? functionName : `native ${functionName}`;
  }
  const src = url.lastIndexOf('/src/');
  if (src >= 0 && !url.includes('node_modules')) {
    return `kvroute src/${url.slice(src + 5).split('/')[0]}`;
  }
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const parts = url.slice(modules + 13).split('/');
    return `dependency ${parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]}`;
  }
  if (url.startsWith('node:')) return 'node internals';
  if (url.startsWith('wasm://')) return 'wasm';
  return url;
}

export interface Shares {
  /** Busy samples in the window (idle ones left out). */
  busySamples: number;
  /**
   * Busy samples over all the window's samples: for the rest, the thread waited on its sockets
   * (for clients or backends, which share the machine's cores with it).
   */
  busyOfWindow: number;
  /** All of kvroute's src/ together, as a share of busy time. */
  kvroute: number;
  /** Each group's share of busy time, largest first; groups under 0.5 % are summed as "other". */
  groups: Record<string, number>;
}

/**
 * Shares of the busy samples of `path` taken between `fromUs` and `toUs`, on the profile's clock
 * (the system's monotonic clock in µs, which process.hrtime reads as well).
 */
export function profileShares(path: string, fromUs: number, toUs: number): Shares {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const groupById = new Map<number, string>();
  for (const n of profile.nodes) {
    groupById.set(n.id, groupOf(n.callFrame.functionName, n.callFrame.url));
  }
  const counts = new Map<string, number>();
  let busy = 0;
  let inWindow = 0;
  let atUs = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    atUs += profile.timeDeltas[i]!;
    if (atUs < fromUs || atUs > toUs) continue;
    inWindow++;
    const group = groupById.get(profile.samples[i]!)!;
    if (group === '(idle)') continue;
    busy++;
    counts.set(group, (counts.get(group) ?? 0) + 1);
  }
  const share = (n: number) => Number((n / Math.max(1, busy)).toFixed(3));
  const groups: Record<string, number> = {};
  let other = 0;
  let kvroute = 0;
  for (const [group, n] of [...counts].sort((a, b) => b[1] - a[1])) {
    if (group.startsWith('kvroute ')) kvroute += n;
    if (n / busy < 0.005) other += n;
    else groups[group] = share(n);
  }
  if (other > 0) groups.other = share(other);
  return {
    busySamples: busy,
    busyOfWindow: Number((busy / Math.max(1, inWindow)).toFixed(3)),
    kvroute: share(kvroute),
    groups,
  };
}
