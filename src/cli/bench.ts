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
import { flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { Progress } from './progress.ts';
import { REQUESTS_OUT_HELP, RequestsFile } from './requestsOut.ts';
import { CLIENT_LOAD_FLAGS, readSimLoadFlags } from './simLoadFlags.ts';
import { readWorkloadFlags, WORKLOAD_FLAGS, workloadHelp } from './workloadFlags.ts';
import { shapeDurationMs } from '../workload/shape.ts';

const FLAGS = flagSpec({
  string:
    'url requests concurrency speedup model api-key label replicas report requests-out ' +
    'slo-ttft-p99-ms slo-tpot-p99-ms',
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
  --concurrency C       requests in flight at most (default unbounded: open loop); an arrival
                        that waits for a slot is timed from its scheduled time
  --max-concurrency N   as --concurrency, but a request is timed from its send, not from its
                        scheduled time (vllm bench --max-concurrency); give one of the two
  --rate-ladder RxS,... stages of R req/s (Poisson) for S seconds, back to back (inference-perf's
                        load.stages), over the workload's prompts in order; the run lasts their sum
  --burst N             the workload's first N prompts all at t = 0 (vllm bench at an infinite
                        request rate); the run lasts until they end
  --burstiness F        gamma gaps between arrivals of --rate or of each --rate-ladder stage,
                        shape F, mean 1/rate (vllm bench --burstiness): 1 Poisson, < 1 burstier,
                        > 1 more even; with --rate, the workload's prompts in order at those times
  --client-timeout S    a request not finished S workload seconds after its send is aborted
                        (the server sees a disconnect) and counted as the error 'timeout'
  --speedup X           the engines' --speedup: arrivals are sent X times faster and measured
                        latencies multiplied by X, so they read in workload ms like sim's
  --model NAME          "model" sent (default: the first of GET /v1/models, else omitted)
  --api-key KEY         sent as Authorization: Bearer KEY
SLO (the run's verdict: met when both p99s are within target and nothing failed)
  --slo-ttft-p99-ms MS  (default ${DEFAULT_SLO.ttftP99Ms}: kvroute sim's, the router seed's cold prefill)
  --slo-tpot-p99-ms MS  (default ${DEFAULT_SLO.tpotP99Ms})
output
  --label NAME          result's "policy" (default null)
  --replicas N          result's "replicas" (default: a kvroute gateway's /router/replicas, else null)
  --json                {"results": [...]} with sim's keys, and "slo", "sloMet", "coldStart"
  --report FILE.html    HTML report: summary, SLO, TTFT CDF, latency, hit rate and load over time
${REQUESTS_OUT_HELP}                        (replica: the gateway's x-kvroute-replica header, else null)
  --quiet               no progress (a line on a TTY, else a line to stderr every ~10 s)
Errors and dropped connections are counted, not fatal. Ctrl-C prints the summary so far.
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
  const flags = readFlags(argv, FLAGS, WORKLOAD_FLAGS, CLIENT_LOAD_FLAGS);
  if (flags === 'help') return 'help';
  // The harness shapes as kvroute sim reads them; bench's --concurrency is an open-loop cap.
  const load = readSimLoadFlags(flags, true);
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
  const read = readWorkloadFlags(flags);
  const requests = flags.positive('requests', true);
  // A ladder lasts its stages and a burst until its requests end, both with no warm-up by
  // default; a rate with burstiness runs as --rate does (as kvroute sim has them).
  const shape = load.shape;
  const w =
    shape === undefined
      ? read
      : {
          ...read,
          workload: { ...read.workload, shape },
          durationS:
            shape.kind === 'ladder'
              ? shapeDurationMs(shape) / 1000
              : shape.kind === 'gamma'
                ? read.durationS
                : undefined,
          warmupS: read.warmupS ?? (shape.kind === 'gamma' ? undefined : 0),
        };
  const durationS =
    w.durationS ??
    (w.workload.kind === 'trace' || requests !== undefined || shape?.kind === 'burst'
      ? undefined
      : DEFAULT_DURATION_S);
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
    concurrency:
      load.maxConcurrency ?? flags.positive('concurrency', true) ?? Number.POSITIVE_INFINITY,
    ...(load.maxConcurrency !== undefined && { timeFromSend: true }),
    ...(load.clientTimeoutMs !== undefined && { clientTimeoutMs: load.clientTimeoutMs }),
    model: flags.string('model') ?? null,
    apiKey: flags.string('api-key') ?? null,
    label: flags.string('label') ?? null,
    replicas: flags.positive('replicas', true) ?? null,
    json: flags.bool('json'),
    reportPath: flags.string('report'),
    requestsOut: flags.string('requests-out'),
    quiet: flags.bool('quiet'),
    slo: {
      ttftP99Ms: flags.positive('slo-ttft-p99-ms') ?? DEFAULT_SLO.ttftP99Ms,
      tpotP99Ms: flags.positive('slo-tpot-p99-ms') ?? DEFAULT_SLO.tpotP99Ms,
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
