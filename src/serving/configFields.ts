/**
 * The gateway config's fields that are one `kvroute serve` option's value, as read: the config
 * file's reader (`config.ts`) and the flags' (`src/cli/serve.ts`) both copy them by these lists
 * (`src/cli/options/fields.ts`). Each list is checked against the type of the fields it fills.
 */
import {
  type FieldRows,
  type FieldValues,
  readFields,
  type RowsFor,
} from '../cli/options/fields.ts';
import type { OptionReader } from '../cli/options/read.ts';
import type { SERVE_OPTIONS } from '../cli/options/serve.ts';
import type { GatewayConfig } from './config.ts';
import type { PlannerConfig } from './planner.ts';

type Serve = typeof SERVE_OPTIONS;

/** `kvroute serve`'s rows read by name: from its flags or from its config file. */
export type ServeReader = OptionReader<Serve>;

/** The fields of `fields` whose row `read` finds given (`readFields` on serve's table). */
export function readServeFields<F extends FieldRows<Serve>>(
  read: ServeReader,
  fields: F,
): FieldValues<Serve, F> {
  return readFields<Serve, F>(read, fields);
}

/** Fields taken as given, from the flag or the config key of the row each names. */
export const PLAIN_FIELDS = {
  host: 'host',
  port: 'port',
  index: 'index',
  tokenizer: 'tokenizer',
  chatTemplate: 'chat-template',
  tokenize: 'tokenize',
  staleMs: 'stale-ms',
  kvThreshold: 'kv-threshold',
  scrapeMs: 'scrape-ms',
  blockSize: 'block-size',
  seed: 'seed',
  pdThreshold: 'pd-threshold',
  embeddedReplicas: 'replicas',
  adminKey: 'admin-key',
  metricsKey: 'metrics-key',
  firstByteTimeoutMs: 'first-byte-timeout-ms',
  headersTimeoutMs: 'headers-timeout-ms',
  requestTimeoutMs: 'request-timeout-ms',
  logLevel: 'log-level',
  accessLog: 'access-log',
  exposeReplicaAddresses: 'expose-replica-addresses',
} as const satisfies { readonly [K in keyof GatewayConfig]?: RowsFor<Serve, GatewayConfig[K]> };

/** The online planner's fields (`--planner-*`; any of them turns the planner on). */
export const PLANNER_FIELDS = {
  windowS: 'planner-window-s',
  intervalS: 'planner-interval-s',
  scaleDownS: 'planner-scale-down-s',
  profile: 'planner-profile',
  sloTtftP99Ms: 'planner-slo-ttft-p99-ms',
  sloTpotP99Ms: 'planner-slo-tpot-p99-ms',
  sloTtftSlowdown: 'planner-slo-ttft-slowdown',
  maxReplicas: 'planner-max-replicas',
  fastWindowS: 'planner-fast-window-s',
} as const satisfies { readonly [K in keyof PlannerConfig]: RowsFor<Serve, PlannerConfig[K]> };
