/**
 * `kvroute bench`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. The workload flags (`../workloadFlags.ts`) and
 * the client-load flags (`../simLoadFlags.ts`, read as kvroute sim reads them) are carried as
 * blocks of their modules' spec and help text.
 */
import { DEFAULT_SLO } from '../../results/slo.ts';
import { flagSpec } from '../args.ts';
import { REQUESTS_OUT_HELP } from '../requestsOut.ts';
import { CLIENT_LOAD_FLAGS } from '../simLoadFlags.ts';
import { WORKLOAD_FLAGS, workloadHelp } from '../workloadFlags.ts';
import { block, bool, int, num, options, str } from './table.ts';

/** Workload seconds of arrivals when neither --duration, --requests nor a trace bounds them. */
export const DEFAULT_BENCH_DURATION_S = 60;

const WORKLOAD_HELP = `workload (as kvroute sim; the same --seed gives the same arrivals and lengths)
${workloadHelp({
  duration: `${DEFAULT_BENCH_DURATION_S}; trace: whole trace`,
  warmup: 'min(60, duration/10); 0 if none',
})}`;

/** The client-load flags as bench sends them (kvroute sim --help words them for a simulation). */
const CLIENT_LOAD_HELP = `  --max-concurrency N   as --concurrency, but a request is timed from its send, not from its
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
`;

const REQUESTS_OUT = `${REQUESTS_OUT_HELP}                        (replica: the gateway's x-kvroute-replica header, else null)\n`;

// biome-ignore format: one option a line
export const BENCH_OPTIONS = options({
  url: str('URL[,URL...]', 'endpoint base URL (required), e.g. http://127.0.0.1:8080; several (gateways sharing state, --nats): requests round robin over them'),
  workload: block(WORKLOAD_FLAGS, WORKLOAD_HELP),
  requests: int('N', 'stop after N requests', { above: 0 }),
  concurrency: int('C', 'requests in flight at most (default unbounded: open loop); an arrival that waits for a slot is timed from its scheduled time', { above: 0, section: 'sending' }),
  'client-load': block(CLIENT_LOAD_FLAGS, CLIENT_LOAD_HELP),
  speedup: num('X', "the engines' --speedup: arrivals are sent X times faster and measured latencies multiplied by X, so they read in workload ms like sim's", { above: 0 }),
  model: str('NAME', '"model" sent (default: the first of GET /v1/models, else omitted)'),
  'api-key': str('KEY', 'sent as Authorization: Bearer KEY'),
  'slo-ttft-p99-ms': num('MS', "the SLO's TTFT p99 (default {default}: kvroute sim's, the router seed's cold prefill)", { above: 0, default: DEFAULT_SLO.ttftP99Ms, section: "SLO (the run's verdict: met when both p99s are within target and nothing failed)" }),
  'slo-tpot-p99-ms': num('MS', "the SLO's TPOT p99", { above: 0, default: DEFAULT_SLO.tpotP99Ms }),
  label: str('NAME', 'result\'s "policy" (default null)', { section: 'output' }),
  replicas: int('N', 'result\'s "replicas" (default: a kvroute gateway\'s /router/replicas, else null)', { above: 0 }),
  json: bool('{"results": [...]} with sim\'s keys, and "slo", "sloMet", "coldStart"'),
  report: str('FILE.html', 'HTML report: summary, SLO, TTFT CDF, latency, hit rate and load over time'),
  'requests-out': block(flagSpec({ string: 'requests-out' }), REQUESTS_OUT),
  quiet: bool('no progress (a line on a TTY, else a line to stderr every ~10 s)'),
});
