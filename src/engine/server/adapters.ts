/**
 * LoRA adapters in the engine server, as vLLM's OpenAI server keeps them
 * (`vllm/entrypoints/openai/models/serving.py`, `vllm/entrypoints/serve/lora/api_router.py`):
 * the registry of adapters by name (from --lora-modules at start, and the runtime API), each with
 * the integer id vLLM gives it (a counter from 1; `lora_id` in KV events), and the runtime API:
 *
 *   POST /v1/load_lora_adapter   {"lora_name", "lora_path", "load_inplace"?}
 *     200 text/plain "Success: LoRA adapter '{name}' added successfully."
 *   POST /v1/unload_lora_adapter {"lora_name"}
 *     200 text/plain "Success: LoRA adapter '{name}' removed successfully."
 *
 * Errors are vLLM's ErrorResponse with its types and messages: `InvalidUserInput` (400) for a
 * missing name or path and for an adapter loaded twice, `NotFoundError` (404) for unloading an
 * unknown adapter, `BadRequestError` (400) when the engine refuses (LoRA off). vLLM serves these
 * routes only when VLLM_ALLOW_RUNTIME_LORA_UPDATING is set; the server mounts them when told to.
 * The simulated engine has no weights: a path is recorded (it is the card's `root`), never read.
 */
import type { ServerResponse } from 'node:http';
import { asObject } from '../../openai/fields.ts';
import { sendJson } from '../../openai/http.ts';

/** One --lora-modules entry: `name=path`, or vLLM's JSON `{"name", "path", "base_model_name"}`. */
export interface LoraModule {
  name: string;
  path: string;
  baseModelName?: string | null;
}

export interface AdapterCard {
  name: string;
  /** vLLM's lora_int_id: 1, 2, ... in load order; kept by an in-place reload. */
  id: number;
  path: string;
  baseModelName: string | null;
}

/** What the registry asks of the engine core when adapters come and go. */
export interface AdapterEngine {
  loadAdapter(name: string): void;
  unloadAdapter(name: string): boolean;
}

/** Whether vLLM's VLLM_ALLOW_RUNTIME_LORA_UPDATING value turns the runtime API on ("1", "true"). */
export function runtimeLoraUpdatingFromEnv(value: string | undefined): boolean {
  return ['1', 'true'].includes((value ?? '0').trim().toLowerCase());
}

export class AdapterRegistry {
  readonly #byName = new Map<string, AdapterCard>();
  /** null: LoRA is off, every load is refused. */
  readonly #engine: AdapterEngine | null;
  #lastId = 0;

  constructor(engine: AdapterEngine | null) {
    this.#engine = engine;
  }

  get enabled(): boolean {
    return this.#engine !== null;
  }

  get(name: string): AdapterCard | undefined {
    return this.#byName.get(name);
  }

  /** Adapters in load order (copies). */
  list(): AdapterCard[] {
    return [...this.#byName.values()].map((card) => ({ ...card }));
  }

  /** vLLM's lora_id of a loaded adapter, null for an unknown name. */
  idOf(name: string): number | null {
    return this.#byName.get(name)?.id ?? null;
  }

  /**
   * Loads an adapter (the engine makes it resident). Throws AdapterError with vLLM's type and
   * message when the name is taken (unless `inPlace`) or LoRA is off.
   */
  load(module: LoraModule, inPlace = false): AdapterCard {
    if (this.#engine === null) {
      throw new AdapterError(400, 'BadRequestError', LORA_DISABLED_MESSAGE);
    }
    const known = this.#byName.get(module.name);
    if (known && !inPlace) {
      throw new AdapterError(
        400,
        'InvalidUserInput',
        `The lora adapter '${module.name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      );
    }
    const card: AdapterCard = {
      name: module.name,
      id: known?.id ?? ++this.#lastId,
      path: module.path,
      baseModelName: module.baseModelName ?? null,
    };
    this.#byName.set(card.name, card);
    this.#engine.loadAdapter(card.name);
    return card;
  }

  /** Unloads an adapter; AdapterError 404 when it is not loaded. */
  unload(name: string): void {
    if (!this.#byName.delete(name)) {
      throw new AdapterError(404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`);
    }
    this.#engine?.unloadAdapter(name);
  }
}

/** vLLM's worker error for a LoRA call on an engine started without --enable-lora. */
export const LORA_DISABLED_MESSAGE = 'LoRA is not enabled. Use --enable-lora to enable LoRA.';

/** A refusal of the LoRA API, with vLLM's status, error type and message. */
export class AdapterError extends Error {
  constructor(
    readonly status: 400 | 404,
    readonly type: 'InvalidUserInput' | 'NotFoundError' | 'BadRequestError',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The string fields `names` of a request (vLLM's `not request.x` is a missing, empty or
 * non-string value), or vLLM's 400 with `message` when any is missing.
 */
function required(fields: Record<string, unknown>, names: string[], message: string): string[] {
  const values = names.map((n) => fields[n]);
  if (values.some((v) => typeof v !== 'string' || v.length === 0)) {
    throw new AdapterError(400, 'InvalidUserInput', message);
  }
  return values as string[];
}

/**
 * Runs one API call on the body's fields: its success text as 200 text/plain, its AdapterError
 * as vLLM's body.
 */
function answer(
  res: ServerResponse,
  body: unknown,
  call: (fields: Record<string, unknown>) => string,
): void {
  let text: string;
  try {
    text = call(asObject(body));
  } catch (err) {
    if (!(err instanceof AdapterError)) throw err;
    sendJson(res, err.status, {
      error: { message: err.message, type: err.type, param: null, code: err.status },
    });
    return;
  }
  res.writeHead(200, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** POST /v1/load_lora_adapter */
export function loadLoraAdapter(
  registry: AdapterRegistry,
  body: unknown,
  res: ServerResponse,
): void {
  answer(res, body, (fields) => {
    const [name, path] = required(
      fields,
      ['lora_name', 'lora_path'],
      "Both 'lora_name' and 'lora_path' must be provided.",
    );
    registry.load({ name: name!, path: path! }, fields.load_inplace === true);
    return `Success: LoRA adapter '${name}' added successfully.`;
  });
}

/** POST /v1/unload_lora_adapter */
export function unloadLoraAdapter(
  registry: AdapterRegistry,
  body: unknown,
  res: ServerResponse,
): void {
  answer(res, body, (fields) => {
    const [name] = required(
      fields,
      ['lora_name'],
      "'lora_name' needs to be provided to unload a LoRA adapter.",
    );
    registry.unload(name!);
    return `Success: LoRA adapter '${name}' removed successfully.`;
  });
}
