/**
 * `kvroute plan --search-fleet`: the cheapest fleet meeting an SLO over a grid of GPUs and TP
 * degrees (src/sim/fleetSearch.ts), on worker threads with progress; `--shard i/n` runs one
 * slice and writes its part, `--merge-shards A,B,...` prints the answer of the whole grid from
 * the parts, byte for byte what the unsharded search prints.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { GPUS, modelByName } from '../model/catalog.ts';
import { describeTtftSlo } from '../results/slo.ts';
import { DEFAULT_POLICY, INDEX_MODES, QUEUE_SOURCES } from '../router/defaults.ts';
import { isPolicyName, POLICY_NAMES } from '../router/registry.ts';
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from '../engine/connector/nixl.ts';
import {
  type FleetCandidate,
  FleetMergeError,
  type FleetSearchPart,
  type FleetSearchResult,
  mergeFleetParts,
  runFleetSearch,
} from '../sim/fleetSearch.ts';
import type { SimConfig } from '../sim/run.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { helpOf } from './options/help.ts';
import {
  DEFAULT_FLEET_DURATION_S,
  DEFAULT_FLEET_MAX_REPLICAS,
  DEFAULT_FLEET_TPOT_P99_MS,
  DEFAULT_FLEET_TTFT_P99_MS,
  PLAN_FLEET_OPTIONS,
} from './options/planFleet.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { readPrices } from './priceFlag.ts';
import { Progress } from './progress.ts';
import { readWorkloadFlags } from './workloadFlags.ts';

const FLAGS = specOf(PLAN_FLEET_OPTIONS);
const DEFAULT_DURATION_S = DEFAULT_FLEET_DURATION_S;

const HELP = `usage: kvroute plan --search-fleet --gpus LIST --tp LIST [flags]
       kvroute plan --merge-shards A.json,B.json,... [--json]

The cheapest fleet meeting the SLO: for every GPU x TP, a replica-count search in the
simulator (as kvroute sim --search), priced at the GPUs' $/h. Prints the cheapest candidate and
a table of all of them; a candidate that meets the SLO at no count names its limit (TPOT floor,
KV fit, prefill floor, or the search's --max-replicas).

${helpOf(PLAN_FLEET_OPTIONS)}`;

export async function runPlanFleet(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const json = flags.bool('json');
  const merge = flags.string('merge-shards');
  if (merge !== undefined) {
    if (flags.bool('search-fleet') || flags.has('shard') || flags.bool('pd')) {
      throw new UsageError(
        '--merge-shards reads the parts of a search; drop --search-fleet, --shard and --pd',
      );
    }
    const result = mergeParts(merge);
    write(flags.string('out'), json ? fleetJson(result) : fleetText(result));
    return 0;
  }
  const shard = readShard(flags.string('shard'));
  const spec = readSearch(flags);
  const progress = new Progress({ command: 'kvroute plan', quiet: flags.bool('quiet') });
  const part = await runFleetSearch({ ...spec, progress, ...(shard && { shard }) });
  progress.done();
  if (shard) {
    write(flags.string('out'), `${JSON.stringify(part)}\n`);
    return 0;
  }
  const result = mergeFleetParts([part]);
  write(flags.string('out'), json ? fleetJson(result) : fleetText(result));
  return 0;
}

/** To stdout, or whole to `path` (written beside it, then renamed: a reader never sees half). */
function write(path: string | undefined, text: string): void {
  if (path === undefined) {
    process.stdout.write(text);
    return;
  }
  const partial = `${path}.partial`;
  writeFileSync(partial, text);
  renameSync(partial, path);
}

function readShard(value: string | undefined): { index: number; count: number } | undefined {
  if (value === undefined) return undefined;
  const m = /^(\d+)\/(\d+)$/.exec(value.trim());
  const index = m ? Number(m[1]) : Number.NaN;
  const count = m ? Number(m[2]) : Number.NaN;
  if (!m || count < 1 || index >= count) {
    throw new UsageError(`--shard must be i/n with 0 <= i < n (e.g. 0/4), got '${value}'`);
  }
  return { index, count };
}

function readList(flags: Flags, name: string): string[] {
  const v = flags.string(name);
  if (v === undefined) throw new UsageError(`--search-fleet needs --${name} LIST`);
  const items = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (items.length === 0) throw new UsageError(`--${name} must list at least one value`);
  return [...new Set(items)];
}

function readSearch(flags: Flags) {
  if (!flags.bool('search-fleet')) {
    throw new UsageError('--shard, --gpus and --tp go with --search-fleet');
  }
  const option = readerOf(PLAN_FLEET_OPTIONS, flags);
  const model = option('model') ?? ENGINE_DEFAULTS.model;
  const gpus = readList(flags, 'gpus').map((g) => {
    const name = g.toLowerCase();
    if (!Object.hasOwn(GPUS, name)) {
      throw new UsageError(`--gpus: unknown GPU '${g}'; accepted: ${Object.keys(GPUS).join(', ')}`);
    }
    return name;
  });
  const tps = readList(flags, 'tp').map((t) => {
    const n = Number(t);
    if (!Number.isInteger(n) || n < 1 || (n & (n - 1)) !== 0) {
      throw new UsageError(`--tp: '${t}' is not a power of two; accepted: 1, 2, 4, 8, ...`);
    }
    return n;
  });
  const modelSpec = modelByName(model);
  for (const tp of tps) {
    if (modelSpec.attentionHeads % tp !== 0) {
      throw new UsageError(
        `--tp ${tp} does not divide ${modelSpec.displayName}'s ${modelSpec.attentionHeads} attention heads; accepted: divisors of ${modelSpec.attentionHeads}`,
      );
    }
  }
  const policy = option('policy') ?? DEFAULT_POLICY;
  if (!isPolicyName(policy)) {
    throw new UsageError(`--policy must be one of ${POLICY_NAMES.join(', ')}; got '${policy}'`);
  }
  const w = readWorkloadFlags(flags);
  const durationS = w.durationS ?? (w.workload.kind === 'trace' ? undefined : DEFAULT_DURATION_S);
  const warmupS = w.warmupS ?? Math.min(60, (durationS ?? DEFAULT_DURATION_S) / 10);
  const base: SimConfig = {
    workload: w.workload,
    seed: w.seed,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    warmupMs: warmupS * 1000,
    replicas: 1,
    engine: {
      ...ENGINE_DEFAULTS,
      model,
      budgetTokens: option('budget') ?? ENGINE_DEFAULTS.budgetTokens,
      maxSeqs: option('max-seqs') ?? ENGINE_DEFAULTS.maxSeqs,
      blockSize: option('block-size') ?? ENGINE_DEFAULTS.blockSize,
    },
    router: { policy, index: INDEX_MODES[0], queueSource: QUEUE_SOURCES[0] },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: {
      ttftP99Ms: option('slo-ttft-p99-ms') ?? DEFAULT_FLEET_TTFT_P99_MS,
      tpotP99Ms: option('slo-tpot-p99-ms') ?? DEFAULT_FLEET_TPOT_P99_MS,
    },
  };
  const pd = option('pd') === true;
  const transferGbps = option('transfer-gbps');
  const transferLatencyMs = option('transfer-latency-ms');
  if (!pd && (transferGbps !== undefined || transferLatencyMs !== undefined)) {
    throw new UsageError('--transfer-gbps and --transfer-latency-ms go with --pd');
  }
  return {
    base,
    gpus,
    tps,
    ...(pd && {
      pd: {
        transferGbps: transferGbps ?? DEFAULT_TRANSFER_GBPS,
        transferLatencyMs: transferLatencyMs ?? DEFAULT_TRANSFER_LATENCY_MS,
      },
    }),
    dollarsPerGpuHour: readPrices(option('price')),
    maxReplicas: option('max-replicas') ?? DEFAULT_FLEET_MAX_REPLICAS,
    threads: option('threads') ?? availableParallelism(),
  };
}

function mergeParts(list: string): FleetSearchResult {
  const paths = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (paths.length === 0)
    throw new UsageError('--merge-shards must list the parts: A.json,B.json,...');
  const parts = paths.map((path) => {
    let part: FleetSearchPart;
    try {
      part = JSON.parse(readFileSync(path, 'utf8')) as FleetSearchPart;
    } catch (err) {
      throw new UsageError(`--merge-shards: cannot read ${path}: ${(err as Error).message}`);
    }
    if (part?.kind !== 'kvroute-fleet-search-part') {
      throw new UsageError(
        `--merge-shards: ${path} is not a part written by --search-fleet --shard`,
      );
    }
    return part;
  });
  try {
    return mergeFleetParts(parts);
  } catch (err) {
    if (err instanceof FleetMergeError) throw new UsageError(`--merge-shards: ${err.message}`);
    throw err;
  }
}

export function fleetJson(r: FleetSearchResult): string {
  const h = r.header;
  const c = r.cheapest;
  return `${JSON.stringify(
    {
      workload: h.workload,
      policy: h.policy,
      model: h.model,
      slo: h.slo,
      dollarsPerGpuHour: h.dollarsPerGpuHour,
      ...(h.pd && { pd: h.pd }),
      cheapest: c && {
        gpu: c.gpu,
        tp: c.tp,
        replicas: c.replicas,
        dollarsPerHour: c.dollarsPerHour,
        ...(h.pd && { pd: c.pd ?? null }),
      },
      candidates: r.candidates,
    },
    null,
    2,
  )}\n`;
}

const fmt = (x: number, digits = 0): string =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export function fleetText(r: FleetSearchResult): string {
  const h = r.header;
  const model = modelByName(h.model).displayName;
  const slo = `${describeTtftSlo(h.slo)}, TPOT p99 ≤ ${fmt(h.slo.tpotP99Ms)} ms`;
  const c = r.cheapest;
  const pd = h.pd !== undefined;
  const lines = [
    `Cheapest fleet: ${h.workload} workload, ${model}, policy ${h.policy}, ${slo}`,
    c
      ? `  ${cheapestLine(c)}`
      : '  none: no candidate meets the SLO at any searched size (limits below)',
    '',
  ];
  const header = [
    'candidate',
    ...(pd ? ['shape'] : []),
    '$/h',
    'GPUs',
    'replicas',
    'TTFT p99 ms',
    'TPOT p99 ms',
    'hit rate',
  ];
  const rows = r.candidates.map((x) => [
    `${x.gpu} TP${x.tp}`,
    ...(pd ? [shapeCell(x)] : []),
    x.dollarsPerHour === null ? '-' : fmt(x.dollarsPerHour, 2),
    x.gpuCount === null ? '-' : String(x.gpuCount),
    x.replicas === null ? '-' : String(x.replicas),
    x.ttftP99Ms === null ? '-' : fmt(x.ttftP99Ms),
    x.tpotP99Ms === null ? '-' : fmt(x.tpotP99Ms, 1),
    x.hitRate === null ? '-' : `${fmt(x.hitRate * 100, 1)}%`,
  ]);
  const widths = header.map((t, i) => Math.max(t.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((s, i) => (i === 0 ? s.padEnd(widths[i]!) : s.padStart(widths[i]!))).join('  ');
  lines.push(line(header), widths.map((w) => '-'.repeat(w)).join('  '));
  r.candidates.forEach((x, i) => {
    const row = line(rows[i]!);
    lines.push(x.limit ? `${row}  ${x.limit.detail}` : row);
  });
  lines.push(
    '',
    `$/h of one GPU: ${h.gpus.map((g) => `${g} ${fmt(h.dollarsPerGpuHour[g]!, 2)}`).join(', ')} (${priceSources(h.gpus, h.dollarsPerGpuHour)})`,
  );
  if (h.pd) {
    lines.push(
      `P/D: KV link ${fmt(h.pd.transferGbps)} GB/s + ${fmt(h.pd.transferLatencyMs)} ms a transfer; a P:D candidate's hit rate is its prefill pool's`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function cheapestLine(c: FleetCandidate): string {
  const cost = `${c.gpuCount} GPUs, $${fmt(c.dollarsPerHour!, 2)}/h`;
  if (c.pd) {
    return `${c.pd.prefill} prefill + ${c.pd.decode} decode x ${c.gpu} TP${c.tp} (P/D) = ${cost}`;
  }
  return `${c.replicas} x ${c.gpu} TP${c.tp}${c.shape ? ' (aggregated)' : ''} = ${cost}`;
}

/** "aggregated", "P:D 13:8", or "P:D -" for a split search that met the SLO at no split. */
function shapeCell(c: FleetCandidate): string {
  if (c.shape !== 'disaggregated') return 'aggregated';
  return c.pd ? `P:D ${c.pd.prefill}:${c.pd.decode}` : 'P:D -';
}

/** Where the prices came from: each catalog sheet once, with its date, or --price. */
function priceSources(gpus: readonly string[], prices: Record<string, number>): string {
  const bySheet = new Map<string, string[]>();
  for (const g of gpus) {
    const listed = GPUS[g]!.price;
    const sheet =
      prices[g] === listed.dollarsPerHour ? `${listed.sheet}, ${listed.asOf}` : '--price';
    bySheet.set(sheet, [...(bySheet.get(sheet) ?? []), g]);
  }
  return [...bySheet].map(([sheet, names]) => `${names.join(', ')}: ${sheet}`).join('; ');
}
