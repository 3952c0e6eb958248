/**
 * `kvroute engine`: one simulated vLLM-compatible engine server. Prints one ready line,
 *   kvroute engine ready url=http://127.0.0.1:8001 model=llama-3.3-70b events=tcp://... replay=-
 * that parents and tests parse, then serves until SIGINT or SIGTERM.
 */
import { type EngineServerOptions, SERVER_DEFAULTS } from '../engine/server/options.ts';
import { startEngineServer } from '../engine/server/server.ts';
import { WIRE_FORMATS } from '../kv/wire.ts';
import { type Flags, flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { ENGINE_FLAGS, ENGINE_HELP, readEngineFlags } from './engineFlags.ts';
import { serveUntilSignal } from './untilSignal.ts';

const FLAGS = flagSpec({
  string:
    'host port served-model-name max-model-len speedup seed tokenizer chat-template ' +
    'kv-events kv-replay kv-events-format kv-events-topic',
});

const DEFAULT_PORT = 8001;

const HELP = `usage: kvroute engine [flags]

A simulated vLLM-compatible engine: OpenAI API (/v1/completions, /v1/chat/completions,
/v1/models, /tokenize, /detokenize, /health), Prometheus /metrics with vLLM's names, KV cache
events over ZMQ in vLLM's wire format. Each engine step sleeps its modeled duration / --speedup.

server
  --host H              interface (default ${SERVER_DEFAULTS.host})
  --port N              port; 0 picks a free one (default ${DEFAULT_PORT})
  --served-model-name S name clients send as "model" (default: --model)
  --max-model-len N     context window (default: the model's)
  --speedup F           modeled time / wall time (default ${SERVER_DEFAULTS.speedup})
  --seed N              seeds the generated text (default ${SERVER_DEFAULTS.seed})
  --tokenizer DIR       a model folder (tokenizer.json, tokenizer_config.json, optional
                        chat_template.jinja), as vLLM's --tokenizer (default: builtin cl100k_base)
  --chat-template FILE  a Jinja chat template, as vLLM's --chat-template (default: the
                        tokenizer's own)
${ENGINE_HELP}KV events
  --kv-events EP        ZMQ PUB endpoint, e.g. tcp://*:5557 (default: off, as vLLM)
  --kv-replay EP        ZMQ ROUTER replay endpoint, e.g. tcp://*:5558
  --kv-events-format F  ${WIRE_FORMATS.join(' | ')} (default ${SERVER_DEFAULTS.kvEventsFormat})
  --kv-events-topic T   topic frame (default empty)
`;

export function readEngineOptions(flags: Flags): EngineServerOptions {
  const server: EngineServerOptions = {
    host: flags.string('host') ?? SERVER_DEFAULTS.host,
    port: flags.number('port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_PORT,
    servedModelName: flags.string('served-model-name'),
    maxModelLen: flags.positive('max-model-len', true),
    speedup: flags.positive('speedup'),
    kvEvents: flags.string('kv-events') ?? null,
    kvReplay: flags.string('kv-replay') ?? null,
    kvEventsFormat: flags.oneOf('kv-events-format', WIRE_FORMATS),
    kvEventsTopic: flags.string('kv-events-topic'),
    seed: flags.number('seed', { integer: true }),
    tokenizer: flags.string('tokenizer'),
    chatTemplate: flags.string('chat-template'),
  };
  // Leave out what was not given, so the server's defaults apply.
  const given = Object.fromEntries(Object.entries(server).filter(([, v]) => v !== undefined));
  return { ...readEngineFlags(flags), ...given };
}

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS, ENGINE_FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const options = readEngineOptions(flags);
  if (options.kvReplay && !options.kvEvents) {
    throw new UsageError('--kv-replay needs --kv-events');
  }
  const server = await startEngineServer(options);
  process.stdout.write(
    `kvroute engine ready url=${server.url} model=${server.servedModelName} events=${server.eventsEndpoint ?? '-'} replay=${server.replayEndpoint ?? '-'}\n`,
  );
  return serveUntilSignal(() => server.close());
}
