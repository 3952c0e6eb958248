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
import { flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { readWorkloadFlags, WORKLOAD_FLAGS, workloadHelp } from './workloadFlags.ts';

const FLAGS = flagSpec({
  string: 'url requests concurrency speedup model api-key label replicas report',
  boolean: 'json quiet',
});

const DEFAULT_DURATION_S = 60;

const HELP = `usage: kvroute bench --url URL[,URL...] [flags]

Open-loop load generator for any OpenAI-compatible endpoint (kvroute serve, kvroute engine,
vLLM, SGLang). Sends the simulator's workload arrivals with real prompts to /v1/completions
(stream, include_usage, ignore_eos, max_tokens = the workload's output length) and measures
TTFT, TPOT, ITL, end to end, errors and the prefix-cache hit rate from the client.

  --url URL[,URL...]    endpoint base URL (required), e.g. http://127.0.0.1:8080; several
                        (gateways sharing state, --nats): requests round robin over them
workload (as kvroute sim; the same --seed gives the same arrivals and lengths)
${workloadHelp({
  duration: `${DEFAULT_DURATION_S}; trace: whole trace`,
  warmup: 'min(60, duration/10); 0 if none',
})}  --requests N          stop after N requests
sending
  --concurrency C       requests in flight at most (default unbounded: open loop)
  --speedup X           the engines' --speedup: arrivals are sent X times faster and measured
                        latencies multiplied by X, so they read in workload ms like sim's
  --model NAME          "model" sent (default: the first of GET /v1/models, else omitted)
  --api-key KEY         sent as Authorization: Bearer KEY
output
  --label NAME          result's "policy" (default null)   --replicas N  result's "replicas"
  --json                {"results": [...]} with sim's keys
  --report FILE.html    the simulator's HTML report for this run
  --quiet               no progress line
Errors and dropped connections are counted, not fatal. Ctrl-C prints the summary so far.
`;

/** The run's options plus what only the CLI needs (output format, report file). */
export interface ParsedBench extends Omit<BenchOptions, 'requests' | 'signal' | 'progress'> {
  requests: number | undefined;
  json: boolean;
  reportPath: string | undefined;
  quiet: boolean;
}

export function parseBenchFlags(argv: string[]): ParsedBench | 'help' {
  const flags = readFlags(argv, FLAGS, WORKLOAD_FLAGS);
  if (flags === 'help') return 'help';
  const raw = flags.string('url');
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
  const w = readWorkloadFlags(flags);
  const requests = flags.positive('requests', true);
  const durationS =
    w.durationS ??
    (w.workload.kind === 'trace' || requests !== undefined ? undefined : DEFAULT_DURATION_S);
  const warmupS = w.warmupS ?? (durationS === undefined ? 0 : Math.min(60, durationS / 10));
  return {
    url,
    ...(urls.length > 1 && { urls }),
    workload: w.workload,
    seed: w.seed,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    requests,
    warmupMs: warmupS * 1000,
    speedup: flags.positive('speedup') ?? 1,
    concurrency: flags.positive('concurrency', true) ?? Number.POSITIVE_INFINITY,
    model: flags.string('model') ?? null,
    apiKey: flags.string('api-key') ?? null,
    label: flags.string('label') ?? null,
    replicas: flags.positive('replicas', true) ?? null,
    json: flags.bool('json'),
    reportPath: flags.string('report'),
    quiet: flags.bool('quiet'),
  };
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseBenchFlags(argv);
  if (parsed === 'help') return printHelp(HELP);
  // Ctrl-C: stop sending, cancel what is in flight, print what was measured.
  const interrupt = new AbortController();
  const onSigint = () => interrupt.abort();
  process.once('SIGINT', onSigint);
  let result: LiveRun;
  try {
    result = await runBench({
      ...parsed,
      ...(parsed.requests !== undefined && { requests: parsed.requests }),
      signal: interrupt.signal,
      progress: !parsed.quiet && !parsed.json,
    });
  } finally {
    process.off('SIGINT', onSigint);
  }
  writeOutputs([result], parsed, `kvroute bench ${argv.join(' ')}`);
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
