/**
 * vLLM's `--kv-transfer-config` (`vllm/config/kv_transfer.py`, `KVTransferConfig`): a JSON object
 * (`'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`) or dotted flags
 * (`--kv-transfer-config.kv_connector=NixlConnector --kv-transfer-config.kv_role=kv_both`), as
 * vLLM's argument parser reads every config class. The NixlConnector (P/D) and the
 * OffloadingConnector (a CPU tier: `kv_connector_extra_config.num_cpu_blocks`, as vLLM's first
 * CPUOffloadingSpec, or `cpu_bytes_to_use`, as later ones and `--kv-offloading-size` set it) are
 * modelled; the other fields are accepted and kept with vLLM's defaults.
 */

/** vLLM's `KVRole`: `KVProducer` is kv_producer | kv_both, `KVConsumer` kv_consumer | kv_both. */
export const KV_ROLES = ['kv_producer', 'kv_consumer', 'kv_both'] as const;
export type KvRole = (typeof KV_ROLES)[number];

/** Connectors the simulated engine models. */
export const KV_CONNECTORS = ['NixlConnector', 'OffloadingConnector'] as const;
export type KvConnectorName = (typeof KV_CONNECTORS)[number];

export class KvTransferConfigError extends Error {
  readonly code = 'ERR_KV_TRANSFER_CONFIG';
}

/** The fields vLLM's KVTransferConfig declares (others are refused, as pydantic does). */
const FIELDS = new Set([
  'kv_connector',
  'engine_id',
  'kv_buffer_device',
  'kv_buffer_size',
  'kv_role',
  'kv_rank',
  'kv_parallel_size',
  'kv_ip',
  'kv_port',
  'kv_connector_extra_config',
  'kv_connector_module_path',
  'kv_load_failure_policy',
  'enable_permute_local_kv',
]);

const FLAG = '--kv-transfer-config';

/** What the flag's JSON and dotted parts give the engine. */
export interface KvTransferConfig {
  kvConnector: KvConnectorName;
  kvRole: KvRole;
  /** vLLM draws a uuid4 when absent; so does `makeEngineId` in the shell. */
  engineId: string | null;
  kvBufferDevice: string;
  kvConnectorExtraConfig: Record<string, unknown>;
}

/**
 * Reads the JSON form and the dotted parts (`kv_role=kv_both`, values JSON when they parse, else
 * strings, as vLLM's parser does), dotted parts applied over the JSON.
 */
export function parseKvTransferConfig(
  json: string | null,
  dotted: readonly string[] = [],
): KvTransferConfig {
  let doc: Record<string, unknown> = {};
  if (json !== null) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      throw new KvTransferConfigError(`${FLAG} must be a JSON object, got '${json}'`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new KvTransferConfigError(`${FLAG} must be a JSON object, got '${json}'`);
    }
    doc = { ...(parsed as Record<string, unknown>) };
  }
  for (const part of dotted) {
    const eq = part.indexOf('=');
    if (eq <= 0) {
      throw new KvTransferConfigError(`${FLAG}.KEY=VALUE expected, got '${FLAG}.${part}'`);
    }
    const key = part.slice(0, eq);
    const raw = part.slice(eq + 1);
    const path = key.split('.');
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // a bare string, as vLLM takes it
    }
    if (path.length === 2 && path[0] === 'kv_connector_extra_config') {
      const extra = (doc.kv_connector_extra_config ?? {}) as Record<string, unknown>;
      doc.kv_connector_extra_config = { ...extra, [path[1]!]: value };
    } else if (path.length === 1) doc[key] = value;
    else throw new KvTransferConfigError(`${FLAG}.${key}: unknown field`);
  }
  return readConfig(doc);
}

function readConfig(doc: Record<string, unknown>): KvTransferConfig {
  for (const key of Object.keys(doc)) {
    if (!FIELDS.has(key)) {
      throw new KvTransferConfigError(
        `${FLAG}: unknown field '${key}' (${[...FIELDS].join(', ')})`,
      );
    }
  }
  const connector = doc.kv_connector;
  if (!KV_CONNECTORS.includes(connector as KvConnectorName)) {
    throw new KvTransferConfigError(
      `${FLAG}: kv_connector must be one of ${KV_CONNECTORS.join(', ')} (the connectors modelled), got ${JSON.stringify(connector ?? null)}`,
    );
  }
  const role = doc.kv_role;
  if (role === undefined || role === null) {
    // vLLM: "Please specify kv_role when kv_connector is set".
    throw new KvTransferConfigError(
      `${FLAG}: kv_role must be set when kv_connector is set (${KV_ROLES.join(', ')})`,
    );
  }
  if (!KV_ROLES.includes(role as KvRole)) {
    throw new KvTransferConfigError(
      `${FLAG}: Unsupported kv_role: ${String(role)}. Supported roles are ${KV_ROLES.join(', ')}`,
    );
  }
  const engineId = doc.engine_id;
  if (engineId !== undefined && engineId !== null && typeof engineId !== 'string') {
    throw new KvTransferConfigError(`${FLAG}: engine_id must be a string`);
  }
  const extra = doc.kv_connector_extra_config ?? {};
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) {
    throw new KvTransferConfigError(`${FLAG}: kv_connector_extra_config must be an object`);
  }
  const device = doc.kv_buffer_device ?? 'cuda';
  if (typeof device !== 'string') {
    throw new KvTransferConfigError(`${FLAG}: kv_buffer_device must be a string`);
  }
  return {
    kvConnector: connector as KvConnectorName,
    kvRole: role as KvRole,
    engineId: (engineId as string | undefined) ?? null,
    kvBufferDevice: device,
    kvConnectorExtraConfig: extra as Record<string, unknown>,
  };
}

/** vLLM's `is_kv_producer` / `is_kv_consumer`. */
export const isKvProducer = (role: KvRole): boolean => role !== 'kv_consumer';
export const isKvConsumer = (role: KvRole): boolean => role !== 'kv_producer';

/**
 * The OffloadingConnector's CPU tier size: `num_cpu_blocks` blocks, or `cpu_bytes_to_use` bytes
 * (vLLM: `num_blocks = cpu_bytes_to_use // kv_bytes_per_offloaded_block`). One is required, as
 * vLLM's CPUOffloadingSpec requires it.
 */
export function cpuTierSpec(
  config: KvTransferConfig,
): { numCpuBlocks: number } | { cpuBytesToUse: number } {
  const extra = config.kvConnectorExtraConfig;
  const blocks = extra.num_cpu_blocks;
  const bytes = extra.cpu_bytes_to_use;
  if (blocks !== undefined) {
    if (!(Number.isInteger(blocks) && (blocks as number) >= 0)) {
      throw new KvTransferConfigError(
        `${FLAG}: kv_connector_extra_config.num_cpu_blocks must be an integer >= 0, got ${JSON.stringify(blocks)}`,
      );
    }
    return { numCpuBlocks: blocks as number };
  }
  if (bytes !== undefined) {
    if (!(typeof bytes === 'number' && Number.isFinite(bytes) && bytes >= 0)) {
      throw new KvTransferConfigError(
        `${FLAG}: kv_connector_extra_config.cpu_bytes_to_use must be a number >= 0, got ${JSON.stringify(bytes)}`,
      );
    }
    return { cpuBytesToUse: bytes };
  }
  throw new KvTransferConfigError(
    `${FLAG}: the OffloadingConnector needs kv_connector_extra_config.num_cpu_blocks or cpu_bytes_to_use`,
  );
}
