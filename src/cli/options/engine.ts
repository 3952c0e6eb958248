/**
 * `kvroute engine`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. Its server, LoRA, P/D and KV-event rows are its
 * own; the engine rows (`../engineFlags.ts`), the faults (`../engineFaultFlags.ts`), the P/D
 * trust flags (`../engineTransferSecurity.ts`) and the NATS credentials (`../natsFlags.ts`) are
 * shared tables. vLLM's spellings (`--tensor-parallel-size`, `--kv-offloading-size`, ...) are
 * rewritten into these names before parsing (`../vllmFlags.ts`); `--sim-model` and
 * `--kv-events-config` are rows so that `--help` and the docs list them, though the rewrite
 * reads them first.
 */
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from '../../engine/connector/nixl.ts';
import { ENGINE_DEFAULTS } from '../../engine/options.ts';
import {
  LLAMA_CPP_DEFAULT_MAX_SEQS,
  LLAMA_CPP_DEFAULT_THREADS,
} from '../../engine/runtime/llamaCpp/serve.ts';
import { SERVER_DEFAULTS } from '../../engine/server/options.ts';
import { DEFAULT_STREAM_LIMITS } from '../../engine/server/streamWriter.ts';
import { DEFAULT_MAX_LOGPROBS } from '../../engine/server/validation.ts';
import { REPLAY_FORMS, WIRE_FORMATS } from '../../kv/wire.ts';
import { DEFAULT_MEMORY_UTILIZATION } from '../../model/cost.ts';
import { DEFAULT_ENGINE_TTL_MS } from '../../sync/discovery.ts';
import { DEFAULT_CLUSTER } from '../../sync/subjects.ts';
import { ENGINE_FAULT_OPTIONS } from '../engineFaultFlags.ts';
import { ENGINE_OPTIONS } from '../engineFlags.ts';
import { TRANSFER_SECURITY_OPTIONS } from '../engineTransferSecurity.ts';
import { NATS_AUTH_OPTIONS } from '../natsFlags.ts';
import { RUNTIME_OPTIONS } from '../runtimeFlags.ts';
import { bool, int, list, num, oneOf, options, str } from './table.ts';

/** `kvroute engine`'s port when --port is not given. */
export const DEFAULT_ENGINE_PORT = 8001;

/** vLLM's --kv-cache-dtype values: `auto` is the model's dtype (BF16 here), the rest FP8. */
export const KV_CACHE_DTYPES = ['auto', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2'] as const;

const S = SERVER_DEFAULTS;

// biome-ignore format: one option a line
export const ENGINE_SERVER_OPTIONS = options({
  runtime: { ...RUNTIME_OPTIONS.runtime, help: "{values} (default sim: the cost model's clock and simulated text; llama.cpp: real forward passes on the CPU through node-llama-cpp)", section: 'runtime' },
  gguf: { ...RUNTIME_OPTIONS.gguf, help: 'the model llama.cpp runs (needs --runtime llama.cpp); its tokenizer and chat template serve the prompts and /tokenize (kvroute model tiny writes one)' },
  threads: { ...RUNTIME_OPTIONS.threads, help: `CPU threads per forward pass (llama.cpp; default {default}). With llama.cpp, --max-seqs defaults to ${LLAMA_CPP_DEFAULT_MAX_SEQS} and as many idle sequences keep KV as a prefix cache; --max-model-len defaults to the model's.`, default: LLAMA_CPP_DEFAULT_THREADS },
  host: str('H', 'interface', { default: S.host, section: 'server' }),
  port: int('N', 'port; 0 picks a free one', { min: 0, max: 65535, default: DEFAULT_ENGINE_PORT }),
  'served-model-name': str('S', 'name clients send as "model" (default: MODEL)'),
  'served-model-alias': list('S', 'another name it answers to, repeatable (what the further names of --served-model-name become)'),
  'api-key': list('KEY...', '/v1 paths need Authorization: Bearer KEY (one of several), else 401 {"error": "Unauthorized"}, as vLLM; default: VLLM_API_KEY, else open. /health, /metrics, /tokenize, /detokenize stay open, as in vLLM; the first key is also the P/D side channel\'s secret by default'),
  'sim-model': str('NAME', `catalog model to simulate, one of --model's (default: the one MODEL names, else ${ENGINE_DEFAULTS.model})`),
  'max-model-len': int('N', "context window (default: the model's)", { above: 0, unit: 'tokens' }),
  'gpu-memory-utilization': num('F', 'fraction of GPU memory for weights and KV', { above: 0, max: 1, default: DEFAULT_MEMORY_UTILIZATION }),
  'kv-cache-dtype': oneOf(KV_CACHE_DTYPES, 'T', '{values} (default auto: BF16)'),
  'enable-prefix-caching': bool('cache prefixes (default on)'),
  'no-enable-prefix-caching': bool('turn the prefix cache off'),
  'max-logprobs': int('N', 'most log-probabilities per token', { min: -1, default: DEFAULT_MAX_LOGPROBS }),
  'enable-auto-tool-choice': bool('serve tool_choice "auto", with --tool-call-parser (the simulated model answers in text; it never calls a tool)'),
  'no-enable-auto-tool-choice': bool('do not (the default)'),
  'tool-call-parser': str('NAME', 'the tool-call parser --enable-auto-tool-choice needs'),
  speedup: num('F', 'modeled time / wall time', { above: 0, default: S.speedup }),
  seed: int('N', 'seeds the generated text', { default: S.seed }),
  'headers-timeout-ms': num('N', "a client's request head must arrive within this", { above: 0, default: S.headersTimeoutMs }),
  'request-timeout-ms': num('N', 'and its whole request within this', { above: 0, default: S.requestTimeoutMs }),
  'stream-buffer-limit-bytes': int('N', 'a stream whose client does not read is aborted (its KV freed) past this many waiting bytes', { above: 0, default: DEFAULT_STREAM_LIMITS.limitBytes }),
  'stream-stall-timeout-ms': num('N', 'or this long without the client draining', { above: 0, default: DEFAULT_STREAM_LIMITS.stallMs }),
  tokenizer: str('DIR', "a model folder (tokenizer.json, tokenizer_config.json, optional chat_template.jinja), as vLLM's --tokenizer (default: builtin cl100k_base)"),
  'chat-template': str('FILE', "a Jinja chat template, as vLLM's --chat-template (default: the tokenizer's own)"),
  ...ENGINE_OPTIONS,
  ...ENGINE_FAULT_OPTIONS,
  'enable-lora': bool('serve LoRA adapters (default off, as vLLM); the limits are --max-loras, --max-cpu-loras, --max-lora-rank, --lora-load-gbps above', { section: 'LoRA adapters (a request whose "model" names an adapter runs with it)' }),
  'no-enable-lora': bool('do not (the default)'),
  'lora-modules': list('M...', 'adapters loaded at start: name=path, or vLLM\'s JSON \'{"name": "sql", "path": "/adapters/sql", "base_model_name": "..."}\''),
  'allow-runtime-lora-updating': bool('serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM serves them when VLLM_ALLOW_RUNTIME_LORA_UPDATING is 1 or true, which this engine also reads)'),
  'kv-transfer-config': str('J', 'vLLM\'s JSON, e.g. \'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\', or dotted: --kv-transfer-config.kv_connector=NixlConnector ...; then a request with kv_transfer_params takes part in vLLM\'s P/D protocol. \'{"kv_connector":"OffloadingConnector","kv_role":"kv_both", "kv_connector_extra_config":{"num_cpu_blocks":N}}\' (or cpu_bytes_to_use) gives the engine a CPU tier, as --cpu-kv-gib / vLLM\'s --kv-offloading-size', { section: "disaggregated prefill and decode (vLLM's NixlConnector, modelled)" }),
  'kv-transfer-config-part': list('FIELD=VALUE', 'one field of --kv-transfer-config, repeatable (what --kv-transfer-config.FIELD=VALUE becomes)'),
  'kv-transfer-gbps': num('F', 'modelled KV link for pulls, GB/s', { above: 0, default: DEFAULT_TRANSFER_GBPS, unit: 'GB/s' }),
  'kv-transfer-latency-ms': num('F', 'modelled latency per pull (default {default}) (VLLM_NIXL_ABORT_REQUEST_TIMEOUT, seconds, frees unpulled blocks; default 480)', { min: 0, default: DEFAULT_TRANSFER_LATENCY_MS }),
  ...TRANSFER_SECURITY_OPTIONS,
  'kv-events-config': str('J', 'vLLM\'s JSON: {"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": ""}', { section: 'KV events' }),
  'kv-events': str('EP', 'ZMQ PUB endpoint, e.g. tcp://*:5557 (default: off, as vLLM)'),
  'kv-replay': str('EP', 'ZMQ ROUTER replay endpoint, e.g. tcp://*:5558'),
  'kv-events-format': oneOf(WIRE_FORMATS, 'F', '{values} (default {default}: vLLM >= 0.26; array: older)', { default: S.kvEventsFormat }),
  'kv-replay-form': oneOf(REPLAY_FORMS, 'F', '{values} (default: topic with map events, as vLLM >= 0.26; no-topic with array events, as older vLLM and SGLang)'),
  'kv-events-topic': str('T', 'topic frame (default empty)'),
  'kv-replay-buffer': int('N', "batches kept for replay (vLLM's buffer_steps, default 10000)", { above: 0 }),
  nats: str('URL', `register in NATS (nats://HOST:4222; JetStream on: nats-server -js): URL, events, replay and model in the bucket kvroute_CLUSTER_engines, written again every ${DEFAULT_ENGINE_TTL_MS / 3000} s; the bucket forgets an entry not written for ${DEFAULT_ENGINE_TTL_MS / 1000} s; deleted when the engine stops`, { section: 'discovery (gateways started with --nats and no --backend follow the registered engines)' }),
  advertise: str('URL', 'the URL gateways reach this engine at (default: its listening URL); its host also replaces a wildcard host in the events/replay endpoints'),
  cluster: str('NAME', "the gateways' --cluster", { default: DEFAULT_CLUSTER }),
  ...NATS_AUTH_OPTIONS,
});
