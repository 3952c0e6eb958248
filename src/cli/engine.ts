/**
 * `kvroute engine`: one simulated vLLM-compatible engine server. Prints one ready line,
 *   kvroute engine ready url=http://127.0.0.1:8001 model=llama-3.3-70b events=tcp://... replay=-
 * that parents and tests parse, then serves until SIGINT or SIGTERM.
 */
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { type EngineServerOptions, SERVER_DEFAULTS } from '../engine/server/options.ts';
import { startEngineServer } from '../engine/server/server.ts';
import { WIRE_FORMATS } from '../kv/wire.ts';
import { GPUS, MODELS } from '../model/catalog.ts';
import { SEED_REPLICA } from '../model/spec.ts';
import { Flags, parseFlags, UsageError } from './args.ts';

const FLAGS = {
  host: { type: 'string' },
  port: { type: 'string' },
  model: { type: 'string' },
  gpu: { type: 'string' },
  tp: { type: 'string' },
  'served-model-name': { type: 'string' },
  'max-model-len': { type: 'string' },
  speedup: { type: 'string' },
  budget: { type: 'string' },
  'max-seqs': { type: 'string' },
  'kv-policy': { type: 'string' },
  'block-size': { type: 'string' },
  'kv-blocks': { type: 'string' },
  'kv-events': { type: 'string' },
  'kv-replay': { type: 'string' },
  'kv-events-format': { type: 'string' },
  'kv-events-topic': { type: 'string' },
  seed: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const HELP = `usage: kvroute engine [flags]

A simulated vLLM-compatible engine: OpenAI API (/v1/completions, /v1/chat/completions,
/v1/models, /tokenize, /health), Prometheus /metrics with vLLM's names, KV cache events over
ZMQ in vLLM's wire format. Each engine step sleeps its modeled duration / --speedup.

  --host H              interface (default ${SERVER_DEFAULTS.host})
  --port N              port; 0 picks a free one (default 8001)
  --model NAME          ${Object.keys(MODELS).join(', ')} (default ${SEED_REPLICA.model})
  --gpu NAME            ${Object.keys(GPUS).join(', ')} (default ${SEED_REPLICA.gpu})
  --tp N                GPUs per replica (default ${SEED_REPLICA.tp})
  --served-model-name S name clients send as "model" (default: --model)
  --max-model-len N     context window (default: the model's)
  --speedup F           modeled time / wall time (default 1)
  --budget N            tokens per step (default ${ENGINE_DEFAULTS.budgetTokens})
  --max-seqs N          running sequences at most (default ${ENGINE_DEFAULTS.maxSeqs})
  --kv-policy P         paged | reserve (default ${ENGINE_DEFAULTS.kvPolicy})
  --block-size N        tokens per KV block (default ${ENGINE_DEFAULTS.blockSize})
  --kv-blocks N         KV pool size in blocks (default: the cost model's pool)
  --kv-events EP        ZMQ PUB endpoint, e.g. tcp://*:5557 (default: off, as vLLM)
  --kv-replay EP        ZMQ ROUTER replay endpoint, e.g. tcp://*:5558
  --kv-events-format F  ${WIRE_FORMATS.join(' | ')} (default map)
  --kv-events-topic T   topic frame (default empty)
  --seed N              seeds the generated text (default 0)
`;

const DEFAULT_PORT = 8001;

export function readEngineOptions(flags: Flags): EngineServerOptions {
  const opts: EngineServerOptions = {
    host: flags.string('host') ?? SERVER_DEFAULTS.host,
    port: flags.number('port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_PORT,
    model: flags.oneOf('model', Object.keys(MODELS)),
    gpu: flags.oneOf('gpu', Object.keys(GPUS)),
    tp: flags.positive('tp', true),
    servedModelName: flags.string('served-model-name'),
    maxModelLen: flags.positive('max-model-len', true),
    speedup: flags.positive('speedup'),
    budgetTokens: flags.positive('budget', true),
    maxSeqs: flags.positive('max-seqs', true),
    kvPolicy: flags.oneOf('kv-policy', ['reserve', 'paged'] as const),
    blockSize: flags.positive('block-size', true),
    kvBlocks: flags.positive('kv-blocks', true),
    kvEvents: flags.string('kv-events') ?? null,
    kvReplay: flags.string('kv-replay') ?? null,
    kvEventsFormat: flags.oneOf('kv-events-format', WIRE_FORMATS),
    kvEventsTopic: flags.string('kv-events-topic'),
    seed: flags.number('seed', { integer: true }),
  };
  // Leave out what was not given, so the server's defaults apply.
  return Object.fromEntries(
    Object.entries(opts).filter(([, v]) => v !== undefined),
  ) as EngineServerOptions;
}

export async function run(argv: string[]): Promise<number> {
  const flags = new Flags(parseFlags(argv, FLAGS));
  if (flags.bool('help')) {
    process.stdout.write(HELP);
    return 0;
  }
  const options = readEngineOptions(flags);
  if (options.kvReplay && !options.kvEvents) {
    throw new UsageError('--kv-replay needs --kv-events');
  }
  const server = await startEngineServer(options);
  process.stdout.write(
    `kvroute engine ready url=${server.url} model=${server.servedModelName} events=${server.eventsEndpoint ?? '-'} replay=${server.replayEndpoint ?? '-'}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await server.close();
  return 0;
}
