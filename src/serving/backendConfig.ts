/**
 * One backend as the config names it: its URL, KV event endpoints, model, role and the keys that
 * tell the router its hardware and cache sizes.
 */
import type { EngineKind } from '../engines/dialect.ts';
import type { BackendRole } from './pdRoles.ts';

export interface BackendConfig {
  /** Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8001. */
  url: string;
  /** ZMQ PUB endpoint of its KV events, e.g. tcp://127.0.0.1:5557; null: none subscribed. */
  events: string | null;
  /** ZMQ ROUTER endpoint that replays buffered batches, e.g. tcp://127.0.0.1:5558. */
  replay: string | null;
  /** Model name it serves, used for /v1/models when the backend cannot be asked. */
  model: string | null;
  /** Sent upstream as `Authorization: Bearer` in place of the client's key. */
  apiKey: string | null;
  /** Its role in a P/D fleet (`pdRoles.ts`); absent: both. */
  role?: BackendRole;
  /**
   * Its engine's kind (`engines/`): vllm, llamacpp, sglang or openai; absent: detected from what
   * it serves (`/props` is llama.cpp's, else the prefix of its metric names, else openai).
   */
  engine?: EngineKind;
  /**
   * The topic its engine publishes KV events under to the bound socket (`kv-events-bind`);
   * absent: llm-d's `kv@<host of url>@<model>` (centralEvents.ts).
   */
  topic?: string | null;
  /**
   * Its hardware, for a pool of mixed replicas: catalog GPU, TP degree and/or a calibrated
   * profile (`kvroute calibrate`); the router then prices its tokens at its own speed
   * (backendSpeed.ts). All absent: the pool's replicas are taken as alike.
   */
  gpu?: string;
  tp?: number;
  profile?: string;
  /**
   * Its engine's CPU tier of KV (vLLM's OffloadingConnector), for the approximate index to model
   * (backendCpuTier.ts): in GiB as vLLM's `--kv-offloading-size`, or in blocks of the gateway's
   * block size as the connector's `num_cpu_blocks`; one at most. Absent: GPU only. The events
   * index learns the tier from the CPU-medium events and needs neither.
   */
  kvOffloadingSizeGiB?: number;
  cpuKvBlocks?: number;
  /**
   * Its engine's GPU KV pool in blocks (`kvroute engine --kv-blocks`, vLLM's
   * `--num-gpu-blocks-override`), for the approximate index to forget beyond; absent: the seed
   * replica's pool, 34,882 blocks.
   */
  kvBlocks?: number;
  /**
   * llama-server's host prompt cache (`--cache-ram`), for the router's slot model
   * (backendHostCache.ts): its bound in tokens (`cache-ram-tokens`, 0: none), or in MiB
   * (`cache-ram`) with the KV bytes of one token (`kv-bytes-per-token`), which llama-server does
   * not serve. Absent: the replica is routed on its slots alone.
   */
  cacheRamTokens?: number;
  cacheRamMiB?: number;
  kvBytesPerToken?: number;
}
