/**
 * `kvroute serve`: the KV-aware OpenAI-compatible gateway. With no backend it starts an embedded
 * fleet of simulated engines and routes to them (that is `npm start`). Flags override the YAML
 * config file; every bad value is one line naming the flag (exit 2).
 */
import { readFileSync } from 'node:fs';
import {
  type ClientKey,
  DEFAULT_EMBEDDED_REPLICAS,
  DEFAULT_POLICY,
  defaultConfig,
  type GatewayConfig,
  INDEX_MODES,
  loadConfigFile,
  parseApiKeyFlag,
  parseBackendFlag,
} from '../gateway/config.ts';
import { startGateway } from '../gateway/gateway.ts';
import { isPolicyName, POLICY_NAMES } from '../router/index.ts';
import { Flags, parseFlags, UsageError } from './args.ts';

const FLAGS = {
  port: { type: 'string' },
  host: { type: 'string' },
  backend: { type: 'string', multiple: true },
  config: { type: 'string' },
  policy: { type: 'string' },
  index: { type: 'string' },
  tokenizer: { type: 'string' },
  'chat-template': { type: 'string' },
  'stale-ms': { type: 'string' },
  'kv-threshold': { type: 'string' },
  'scrape-ms': { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'block-size': { type: 'string' },
  replicas: { type: 'string' },
  speedup: { type: 'string' },
  seed: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const HELP = `usage: kvroute serve [flags]

A KV-cache-aware OpenAI-compatible gateway: tokenizes each request, asks the router for the
replica where it adds the least prefill work, and proxies the response back unchanged.
With no --backend (and none in --config) it starts ${DEFAULT_EMBEDDED_REPLICAS} simulated engines in this process.

  --port N              listen port; 0 picks a free one (default 8080)
  --host H              interface (default 127.0.0.1)
  --backend SPEC        a backend, repeatable: URL[,events=tcp://H:P][,replay=tcp://H:P]
                        [,model=NAME][,api-key=KEY]; replaces the config file's list
  --config FILE         YAML config (see kvroute.example.yaml); flags override it
  --policy P            ${POLICY_NAMES.join(', ')} (default ${DEFAULT_POLICY})
  --index M             events (KV events over ZMQ) | approx (the router's own record)
  --tokenizer T         builtin (the engine's) | PATH/tokenizer.json (byte-level BPE)
  --chat-template FILE  YAML with turn ({role}, {content}), prefix, generation
  --stale-ms N          exclude replicas whose last report is older (default 500)
  --kv-threshold F      exclude replicas above this KV usage (default 0.95)
  --scrape-ms N         /metrics scrape interval (default 100)
  --api-key KEY[=TENANT] require this client key, repeatable; its tenant salts the cache
  --block-size N        tokens per KV block, as the engines use (default 16)
  --replicas N          embedded fleet size (default ${DEFAULT_EMBEDDED_REPLICAS})
  --speedup F           embedded engines' modeled time / wall time (default 1)
  --seed N              router seed: tie-breaks and the random policy (default 1, as sim)
`;

/** Flags over the config file over the defaults. */
export function readServeConfig(flags: Flags): GatewayConfig {
  const path = flags.string('config');
  let config = path === undefined ? defaultConfig() : loadConfigFile(path);
  const set = <K extends keyof GatewayConfig>(
    key: K,
    value: GatewayConfig[K] | undefined,
  ): void => {
    if (value !== undefined) config = { ...config, [key]: value };
  };
  set('port', flags.number('port', { min: 0, max: 65535, integer: true }));
  set('host', flags.string('host'));
  const policy = flags.string('policy');
  if (policy !== undefined && !isPolicyName(policy)) {
    throw new UsageError(`--policy must be one of ${POLICY_NAMES.join(', ')}; got '${policy}'`);
  }
  set('policy', policy);
  if (!isPolicyName(config.policy)) {
    throw new UsageError(
      `config: policy must be one of ${POLICY_NAMES.join(', ')}; got '${config.policy}'`,
    );
  }
  set('index', flags.oneOf('index', INDEX_MODES));
  const tokenizer = flags.string('tokenizer');
  if (tokenizer !== undefined && tokenizer !== 'builtin') readable(tokenizer, '--tokenizer');
  set('tokenizer', tokenizer);
  const template = flags.string('chat-template');
  if (template !== undefined) readable(template, '--chat-template');
  set('chatTemplate', template);
  set('staleMs', flags.positive('stale-ms'));
  set('kvThreshold', flags.fraction('kv-threshold'));
  set('scrapeMs', flags.positive('scrape-ms'));
  set('blockSize', flags.positive('block-size', true));
  set('seed', flags.number('seed', { min: 0, integer: true }));
  set('embeddedReplicas', flags.number('replicas', { min: 1, max: 64, integer: true }));
  const backends = flags.strings('backend');
  if (backends.length > 0)
    set(
      'backends',
      backends.map((b) => parseBackendFlag(b)),
    );
  const keys: ClientKey[] = flags.strings('api-key').map(parseApiKeyFlag);
  if (keys.length > 0) set('apiKeys', keys);
  return config;
}

function readable(path: string, flag: string): void {
  try {
    readFileSync(path);
  } catch (err) {
    throw new UsageError(
      `${flag} cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
}

export async function run(argv: string[]): Promise<number> {
  const flags = new Flags(parseFlags(argv, FLAGS));
  if (flags.bool('help')) {
    process.stdout.write(HELP);
    return 0;
  }
  const config = readServeConfig(flags);
  const speedup = flags.positive('speedup');
  const gateway = await startGateway(
    config,
    speedup === undefined ? {} : { embeddedSpeedup: speedup },
  );
  const out = process.stdout;
  out.write(
    `kvroute serve listening on ${gateway.url} (policy ${config.policy}, index ${config.index}${config.apiKeys.length > 0 ? `, ${config.apiKeys.length} API keys` : ''})\n`,
  );
  out.write(`replicas${gateway.replicas[0]?.embedded ? ' (embedded simulated engines)' : ''}:\n`);
  for (const r of gateway.replicas) {
    out.write(
      `  ${r.name.padEnd(22)} ${r.url}  events=${r.events ?? '-'} replay=${r.replay ?? '-'}\n`,
    );
  }
  if (config.index === 'events') {
    for (const r of gateway.replicas.filter((x) => x.events === null)) {
      process.stderr.write(
        `kvroute serve: ${r.name} has no events endpoint; the router knows its cache only from recent routes (set events= or use --index approx)\n`,
      );
    }
  }
  const auth = config.apiKeys.length > 0 ? " -H 'authorization: Bearer YOUR_KEY'" : '';
  out.write(
    `try:\n  curl -s ${gateway.url}/v1/chat/completions -H 'content-type: application/json'${auth} -d '{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'\n  curl -s ${gateway.url}/router/replicas\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await gateway.close();
  return 0;
}
