/**
 * `kvroute bench`: the load generator. Replays a simulator workload (same arrivals and lengths
 * for the same seed) with real prompts against any OpenAI-compatible endpoint, streams every
 * answer, and prints what the client measured with the keys and charts of `kvroute sim`.
 */
import { writeFileSync } from 'node:fs';
import { type BenchOptions, runBench } from '../loadgen/run.ts';
import { renderReport } from '../results/report.ts';
import { type LiveRun, resultsJson } from '../results/result.ts';
import { formatLiveResults } from '../results/table.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import { DEFAULT_SLO, type SloTargets } from '../results/slo.ts';
import { warmStartWarning } from '../loadgen/warmStart.ts';
import { printHelp, readFlags, UsageError } from './args.ts';
import { BENCH_OPTIONS, DEFAULT_BENCH_DURATION_S } from './options/bench.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { Progress } from './progress.ts';
import { RequestsFile } from './requestsOut.ts';
import { readSimLoadFlags } from './simLoadFlags.ts';
import { readWorkloadFlags, withArrivalShape } from './workloadFlags.ts';

const FLAGS = specOf(BENCH_OPTIONS);

const HELP = `usage: kvroute bench --url URL[,URL...] [flags]

Open-loop load generator for any OpenAI-compatible endpoint (kvroute serve, kvroute engine,
vLLM, SGLang). Sends the simulator's workload arrivals with real prompts to /v1/completions
(stream, include_usage, ignore_eos, max_tokens = the workload's output length) and measures
TTFT, TPOT, ITL, end to end, errors and the prefix-cache hit rate from the client.

${helpOf(BENCH_OPTIONS)}Errors and dropped connections are counted, not fatal. Ctrl-C prints the summary so far.
A warning (stderr and the report) says when the first requests of new customers already hit
the cache: the fleet was warm from an earlier run.
`;

/** The run's options plus what only the CLI needs (output format, report file). */
export interface ParsedBench
  extends Omit<BenchOptions, 'requests' | 'signal' | 'onProgress' | 'onRequest'> {
  requests: number | undefined;
  json: boolean;
  reportPath: string | undefined;
  requestsOut: string | undefined;
  quiet: boolean;
  slo: SloTargets;
}

export function parseBenchFlags(argv: string[]): ParsedBench | 'help' {
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return 'help';
  const option = readerOf(BENCH_OPTIONS, flags);
  // The harness shapes as kvroute sim reads them; bench's --concurrency is an open-loop cap.
  const load = readSimLoadFlags(flags, true);
  const raw = option('url');
  if (raw === undefined)
    throw new UsageError('--url is required, e.g. --url http://127.0.0.1:8080');
  const urls = raw.split(',').map((u) => u.trim().replace(/\/+$/, ''));
  for (const u of urls) {
    if (!/^https?:\/\/[^/]+/.test(u))
      throw new UsageError(
        `--url must be http(s)://HOST:PORT[,http(s)://HOST:PORT...], got '${u}'`,
      );
  }
  const url = urls[0]!;
  const read = readWorkloadFlags(flags);
  const requests = option('requests');
  const shape = load.shape;
  const w = withArrivalShape(read, shape, undefined);
  const durationS =
    w.durationS ??
    (w.workload.kind === 'trace' || requests !== undefined || shape?.kind === 'burst'
      ? undefined
      : DEFAULT_BENCH_DURATION_S);
  const warmupS = w.warmupS ?? (durationS === undefined ? 0 : Math.min(60, durationS / 10));
  return {
    url,
    ...(urls.length > 1 && { urls }),
    workload: w.workload,
    seed: w.seed,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    requests,
    warmupMs: warmupS * 1000,
    speedup: option('speedup') ?? 1,
    concurrency: load.maxConcurrency ?? option('concurrency') ?? Number.POSITIVE_INFINITY,
    ...(load.maxConcurrency !== undefined && { timeFromSend: true }),
    ...(load.clientTimeoutMs !== undefined && { clientTimeoutMs: load.clientTimeoutMs }),
    model: option('model') ?? null,
    apiKey: option('api-key') ?? null,
    label: option('label') ?? null,
    replicas: option('replicas') ?? null,
    json: option('json') === true,
    reportPath: option('report'),
    requestsOut: flags.string('requests-out'),
    quiet: option('quiet') === true,
    slo: {
      ttftP99Ms: option('slo-ttft-p99-ms') ?? DEFAULT_SLO.ttftP99Ms,
      tpotP99Ms: option('slo-tpot-p99-ms') ?? DEFAULT_SLO.tpotP99Ms,
    },
  };
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseBenchFlags(argv);
  if (parsed === 'help') return printHelp(HELP);
  // Ctrl-C: stop sending, cancel what is in flight, print what was measured.
  const interrupt = new AbortController();
  const onSigint = () => interrupt.abort();
  process.once('SIGINT', onSigint);
  const requests = parsed.requestsOut === undefined ? null : new RequestsFile(parsed.requestsOut);
  const progress = new Progress({ command: 'kvroute bench', quiet: parsed.quiet });
  progress.phase(parsed.label ?? 'bench', { unit: 'runs', of: 'requests' });
  const task = progress.task(parsed.workload.kind === 'trace' ? 'trace' : parsed.workload.name);
  let result: LiveRun;
  try {
    result = await runBench({
      ...parsed,
      ...(parsed.requests !== undefined && { requests: parsed.requests }),
      signal: interrupt.signal,
      onProgress: (f, detail) => task.update(f, detail),
      ...(requests && { onRequest: (r: RequestRecord) => requests.add(0, r) }),
    });
  } finally {
    process.off('SIGINT', onSigint);
    task.end();
    progress.done();
    requests?.close();
  }
  const warning = warmStartWarning(result.coldStart);
  if (warning !== null) process.stderr.write(`kvroute bench: warning: ${warning}\n`);
  writeOutputs([result], parsed, `kvroute bench ${argv.join(' ')}`);
  if (requests && !parsed.json) process.stdout.write(`requests: ${parsed.requestsOut}\n`);
  return interrupt.signal.aborted ? 130 : 0;
}

export function writeOutputs(
  results: LiveRun[],
  o: { json: boolean; reportPath: string | undefined },
  command: string,
): void {
  if (o.reportPath !== undefined) {
    writeFileSync(
      o.reportPath,
      renderReport(results, [], {
        title: `kvroute bench: ${results[0]?.workload ?? ''}`,
        command,
      }),
    );
  }
  if (o.json) {
    process.stdout.write(`${resultsJson(results)}\n`);
    return;
  }
  process.stdout.write(`${formatLiveResults(results)}\n`);
  if (o.reportPath !== undefined) process.stdout.write(`\nreport: ${o.reportPath}\n`);
}
