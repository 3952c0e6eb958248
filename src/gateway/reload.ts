/**
 * A configuration read again (SIGHUP, or the file changed) applied to a running gateway. The
 * backend list is diffed against the previous configuration, not against the live set, so
 * backends added or removed through the admin API stay as they are: added entries start cold,
 * removed ones drain once the added ones take traffic, a changed entry (same URL) drains and
 * starts again. Keys, tenants, the
 * retry and first-byte settings, the body limit, the access log and the log level apply at
 * once, and so do flow control's settings (classes, weights, bounds, deadline, release rule,
 * saturation limits) while it stays on (`FlowControl.reconfigure`: waiting requests keep their
 * places); turning it on or off, and every other changed key, is named as needing a restart.
 */
import { watch as watchFs } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { ApiError } from '../openai/errors.ts';
import { GatewayAdmission } from '../serving/admission.ts';
import { Authenticator } from '../serving/auth.ts';
import { replicaName } from '../serving/backends.ts';
import { type GatewayConfig, PLAIN_FIELDS } from '../serving/config.ts';
import type { BackendConfig } from '../serving/backendConfig.ts';
import type { GenerateContext } from './generateContext.ts';
import type { Logger } from '../serving/log.ts';
import type { ModelPools } from '../serving/pools.ts';
import type { RoutesContext } from './routes.ts';

export interface ReloadResult {
  /** Backend URLs that started cold. */
  added: string[];
  /** Backend URLs that drain. */
  removed: string[];
  /** Backend URLs whose entry changed: drained, and started again with the new entry. */
  replaced: string[];
  /** Config keys (spelled as in the file) applied at once. */
  applied: string[];
  /** Config keys that changed but apply only at the next start. */
  needsRestart: string[];
}

/**
 * The file's spelling of each config field, for the log: the plain fields as serve's table
 * names them, and the fields read from several keys named by a short list.
 */
const FILE_KEYS: Record<keyof GatewayConfig, string> = {
  ...PLAIN_FIELDS,
  backends: 'backends',
  policy: 'policy',
  modelTokenizers: 'models',
  bodyLimitBytes: 'body-limit-bytes',
  maxRetries: 'max-retries',
  apiKeys: 'api-keys',
  tenantSalts: 'tenants',
  admission: 'max-queue-ms, max-ttft-ms, priority-classes, tenant limits',
  flowControl: 'flow-control, tenant flow weights',
  nats: '--nats, --cluster',
  decodeCost: 'decode-cost-tokens, engine-budget',
  scorerWeights: 'scorer-weights',
  prefixCacheScorer: 'prefix-cache-scorer',
  kvEventsBind: 'kv-events-bind',
  eventsCheckMs: 'events check period',
  sessionAffinity: 'session-affinity, session-header, session-slack-tokens, session-max',
  planner: 'planner, planner-*',
};

const AUTH_KEYS = ['apiKeys', 'tenantSalts', 'adminKey', 'metricsKey'] as const;
const LIVE_KEYS = new Set<keyof GatewayConfig>([
  ...AUTH_KEYS,
  'backends',
  'maxRetries',
  'firstByteTimeoutMs',
  'bodyLimitBytes',
  'accessLog',
  'logLevel',
  'admission',
]);

export interface LiveParts {
  pools: ModelPools;
  generate: GenerateContext;
  routes: RoutesContext;
  logger: Logger;
}

export function applyLive(old: GatewayConfig, next: GatewayConfig, live: LiveParts): ReloadResult {
  const changed = (key: keyof GatewayConfig): boolean => !isDeepStrictEqual(old[key], next[key]);
  const result: ReloadResult = {
    ...applyBackends(old.backends, next.backends, live),
    applied: [],
    needsRestart: [],
  };
  const { generate, routes, logger } = live;
  if (AUTH_KEYS.some(changed)) {
    generate.auth = new Authenticator(next.apiKeys, next.tenantSalts, next);
  }
  if (changed('admission')) {
    generate.admission = new GatewayAdmission(next.admission, (limit, tenant) =>
      generate.metrics.recordRejection(limit, tenant),
    );
  }
  generate.maxRetries = next.maxRetries;
  generate.firstByteTimeoutMs = next.firstByteTimeoutMs;
  generate.bodyLimitBytes = next.bodyLimitBytes;
  routes.accessLog = next.accessLog;
  // Only a changed level: a gateway embedded without a log keeps it silent.
  if (changed('logLevel')) logger.level = next.logLevel;
  // Flow control on at start and still on: its settings apply now (classes come from admission).
  const flowLive = generate.flow !== null && next.flowControl.enabled;
  if (flowLive && (changed('flowControl') || changed('admission'))) {
    generate.flow!.reconfigure(next.flowControl, next.admission);
  }
  for (const key of Object.keys(FILE_KEYS) as (keyof GatewayConfig)[]) {
    if (!changed(key)) continue;
    const live = LIVE_KEYS.has(key) || (key === 'flowControl' && flowLive);
    (live ? result.applied : result.needsRestart).push(FILE_KEYS[key]);
  }
  // Sorted, so the log line does not follow the order the fields are declared in.
  result.applied.sort();
  result.needsRestart.sort();
  logger.info(
    {
      added: result.added,
      removed: result.removed,
      replaced: result.replaced,
      applied: result.applied,
    },
    'config reloaded',
  );
  if (result.needsRestart.length > 0) {
    logger.warn(
      { keys: result.needsRestart },
      'config keys changed that apply only at the next start; the running values stay',
    );
  }
  return result;
}

/**
 * A backend the new config drops drains once the backends it adds take traffic (at most this
 * long after the reload), so swapping the whole set never leaves the gateway without one.
 */
export const RELOAD_HANDOVER_MS = 30_000;

function applyBackends(
  old: readonly BackendConfig[],
  next: readonly BackendConfig[],
  { pools, logger }: LiveParts,
): Pick<ReloadResult, 'added' | 'removed' | 'replaced'> {
  const before = new Map(old.map((b) => [b.url, b]));
  const after = new Map(next.map((b) => [b.url, b]));
  const out = { added: [] as string[], removed: [] as string[], replaced: [] as string[] };
  const add = (b: BackendConfig): boolean => {
    try {
      pools.add(b);
      return true;
    } catch (err) {
      // Already there (added through the admin API): it stays as it is.
      if (!(err instanceof ApiError && err.code === 'ERR_CONFLICT')) throw err;
      logger.info({ url: b.url }, 'config adds a backend that is already in the gateway');
      return false;
    }
  };
  const leaving: string[] = [];
  for (const [url, b] of before) {
    const now = after.get(url);
    if (now === undefined) leaving.push(url);
    else if (!isDeepStrictEqual(now, b)) {
      // The same URL cannot be in twice: this one drains first.
      pools.remove(url);
      if (add(now)) out.replaced.push(url);
    }
  }
  for (const [url, b] of after) if (!before.has(url) && add(b)) out.added.push(url);
  const known = new Set(pools.backends().map((b) => b.url));
  out.removed = leaving.filter((url) => known.has(url));
  if (out.removed.length > 0) {
    const arrivals = out.added.map((url) => pools.whenActive(replicaName(url), RELOAD_HANDOVER_MS));
    void Promise.all(arrivals).then(() => {
      for (const url of out.removed) pools.remove(url);
    });
  }
  return out;
}

/** After the last change event, wait this long: an editor's save is several events. */
export const CONFIG_WATCH_DEBOUNCE_MS = 200;

/**
 * Calls `onChange` after the file at `path` changes (debounced). Watches its folder, so an
 * editor that saves by renaming a new file over the old one is seen too.
 */
export function watchConfigFile(
  path: string,
  onChange: () => void,
  debounceMs = CONFIG_WATCH_DEBOUNCE_MS,
): { close(): void } {
  const full = resolve(path);
  const name = basename(full);
  let timer: NodeJS.Timeout | null = null;
  const watcher = watchFs(dirname(full), (_event, file) => {
    if (file !== null && file.toString() !== name) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = null;
      onChange();
    }, debounceMs);
    timer.unref();
  });
  watcher.unref();
  return {
    close() {
      if (timer) clearTimeout(timer);
      watcher.close();
    },
  };
}
