/**
 * `kvroute epp`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. Its own rows (ports, the pool, the gRPC
 * connection limits) come first; the routing options are `serve`'s rows, same meaning and
 * defaults (`readServeConfig` reads them), a few with help saying what they are for a picker.
 */
import { DEFAULT_HOST } from '../../serving/configDefaults.ts';
import {
  DEFAULT_EPP_HEALTH_PORT,
  DEFAULT_EPP_METRICS_PORT,
  DEFAULT_EPP_PORT,
  DEFAULT_GRPC_LIMITS,
} from '../../epp/server.ts';
import { FLOW_OPTIONS, FLOW_SECTION } from '../flowFlags.ts';
import { NATS_AUTH_OPTIONS } from '../natsFlags.ts';
import { NATS_BOUNDS_OPTIONS, SERVE_OPTIONS as S } from './serve.ts';
import { bool, int, list, type OptionRow, options, str } from './table.ts';

const D = DEFAULT_GRPC_LIMITS;
const PORT = { min: 0, max: 65535 } as const;
const POOL_PORT = { min: 1, max: 65535 } as const;

/** The flow-control flags, as the picker's queue (before its pick, not in a gateway). */
const FLOW_CONTROL = FLOW_OPTIONS['flow-control'];
const FLOW_OPTIONS_EPP = {
  ...FLOW_OPTIONS,
  'flow-control': {
    ...FLOW_CONTROL,
    section: FLOW_SECTION.replace('wait in the gateway', 'wait in the picker'),
    help: FLOW_CONTROL.help.replace('request waits here', 'request waits here, before its pick'),
  },
} as const;

/** A row without its `--help` heading (serve's admission heading, not epp's). */
function unsectioned<R extends OptionRow>(row: R): Omit<R, 'section'> {
  const { section: _, ...rest } = row;
  return rest;
}

// biome-ignore format: one option a line
export const EPP_OPTIONS = options({
  port: int('N', 'ext_proc port, plaintext HTTP/2; 0 picks a free one', { ...PORT, default: DEFAULT_EPP_PORT }),
  'health-port': int('N', 'gRPC health service (also served on --port)', { ...PORT, default: DEFAULT_EPP_HEALTH_PORT }),
  'metrics-port': int('N', '/metrics, /router/replicas, /health (and /planner/desired with --planner) over HTTP', { ...PORT, default: DEFAULT_EPP_METRICS_PORT }),
  host: str('H', `interface of all three (default ${DEFAULT_HOST}; 0.0.0.0 in a pod)`),
  'pool-backends': list('LIST', "the pool's endpoints: ip:port (or URLs) separated by commas, repeatable; each is a backend at http://ip:port"),
  'pool-events-port': int('N', "KV events of every pool backend at tcp://ip:N (vLLM's publisher)", POOL_PORT),
  'pool-replay-port': int('N', 'and their replay at tcp://ip:N', POOL_PORT),
  'kv-events-bind': str('EP', "or bind one SUB socket (tcp://*:5557) that every pod's publisher connects to, pods told apart by topic kv@<pod-ip>@<model> (llm-d's deployment; kvroute serve --help)"),
  backend: list('SPEC', 'a backend as kvroute serve takes it: URL[,events=tcp://H:P] [,replay=tcp://H:P][,model=NAME][,api-key=KEY]; repeatable; [,kv-offloading-size=GiB | ,cpu-kv-blocks=N][,kv-blocks=N]: its CPU tier and GPU pool for --index approx (kvroute serve --help)'),
  config: str('FILE', "kvroute serve's YAML config: backends, policy, tokenizer, tenants and admission; its port and host keys are the gateway's, not used"),
  'expose-replica-addresses': bool("x-kvroute-replica gives the replica's ip:port (default: a label, replica-0, replica-1, ...; docs/security.md)"),
  'grpc-idle-ms': int('N', 'close a connection with no stream for N ms, one that only sent the HTTP/2 preface included (grpc.max_connection_idle_ms, default {default})', { above: 0, default: D.idleMs, section: 'connection limits of the gRPC ports (grpc-js options; Envoy reconnects on its next request)' }),
  'grpc-keepalive-ms': int('N', 'ping an idle peer every N ms (grpc.keepalive_time_ms, default {default})', { above: 0, default: D.keepaliveMs }),
  'grpc-keepalive-timeout-ms': int('N', 'close it when a ping is not answered within N ms (grpc.keepalive_timeout_ms, default {default})', { above: 0, default: D.keepaliveTimeoutMs }),
  'grpc-max-age-ms': int('N', 'close a connection N ms old once its streams end (grpc.max_connection_age_ms, default: no limit)', { above: 0 }),
  'grpc-max-age-grace-ms': int('N', 'then close it forcibly N ms later (default: none)', { above: 0 }),
  policy: { ...S.policy, section: "serve's routing flags, same meaning and defaults (kvroute serve --help)" },
  index: S.index,
  tokenizer: S.tokenizer,
  'chat-template': S['chat-template'],
  tokenize: S.tokenize,
  'stale-ms': S['stale-ms'],
  'kv-threshold': S['kv-threshold'],
  'scrape-ms': S['scrape-ms'],
  'block-size': S['block-size'],
  seed: S.seed,
  'scorer-weights': S['scorer-weights'],
  'prefix-cache-scorer': S['prefix-cache-scorer'],
  'log-level': S['log-level'],
  'max-queue-ms': unsectioned(S['max-queue-ms']),
  'max-ttft-ms': S['max-ttft-ms'],
  'prefill-us-per-token': S['prefill-us-per-token'],
  replicas: { ...S.replicas, help: "the embedded simulated fleet's size, when no backend is given" },
  speedup: S.speedup,
  nats: { ...S.nats, help: "share routing state over NATS with the cluster's other pickers and gateways (as kvroute serve --nats): active-active pickers", section: 'several pickers (see docs/nats.md)' },
  cluster: S.cluster,
  'nats-heartbeat-ms': S['nats-heartbeat-ms'],
  'nats-peer-timeout-ms': S['nats-peer-timeout-ms'],
  ...NATS_AUTH_OPTIONS,
  ...NATS_BOUNDS_OPTIONS,
  ...FLOW_OPTIONS_EPP,
  planner: { ...S.planner, help: "as kvroute serve --planner, over the requests this picker picks for: gauge kvroute_planner_desired_replicas{pool} and GET /planner/desired (KEDA metrics-api) on --metrics-port, a log line on change; with --nats the window is the cluster's (every picker's and gateway's requests)" },
  'planner-window-s': S['planner-window-s'],
  'planner-interval-s': S['planner-interval-s'],
  'planner-scale-down-s': S['planner-scale-down-s'],
  'planner-profile': S['planner-profile'],
  'planner-slo-ttft-p99-ms': S['planner-slo-ttft-p99-ms'],
  'planner-slo-tpot-p99-ms': S['planner-slo-tpot-p99-ms'],
  'planner-slo-ttft-slowdown': S['planner-slo-ttft-slowdown'],
  'planner-max-replicas': S['planner-max-replicas'],
  'planner-fast-window-s': S['planner-fast-window-s'],
});
