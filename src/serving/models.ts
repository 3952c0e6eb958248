/**
 * What a backend serves, read from its `/v1/models` as vLLM writes it
 * (`vllm/entrypoints/openai/models/serving.py`): one card per served name of the base model
 * (`parent: null`, `max_model_len` set) and one per loaded LoRA adapter (`parent` = the base
 * model's name, `max_model_len: null`). The model named by `model=` in a backend's entry is its
 * served name, first among its bases, whatever id its engine reports (llama-server reports the
 * `-m` path as typed, which changes with the command line): the engine's own ids answer too. A
 * backend without `model=` serves what its engine reports, or nothing known.
 */
import type { ModelCard } from './backends.ts';

export interface ServedModels {
  /** Names of the base model, the first being the one it is known by (vLLM lists it first). */
  bases: string[];
  /** Adapter name -> its card. */
  adapters: Map<string, ModelCard>;
  /** Every card, in the backend's order, for the merged `/v1/models`. */
  cards: ModelCard[];
  /** The base ids the engine itself reported (empty: it could not be asked). */
  reported: string[];
}

/** From a backend's cards (null: it could not be asked) and the model its entry names. */
export function servedModels(cards: ModelCard[] | null, configured: string | null): ServedModels {
  const list = cards ?? [];
  const reported = list.filter((c) => typeof c.parent !== 'string').map((c) => c.id);
  const adapters = new Map<string, ModelCard>();
  for (const c of list) if (typeof c.parent === 'string') adapters.set(c.id, c);
  const out: ServedModels = { bases: [...reported], adapters, cards: [...list], reported };
  if (configured !== null) {
    out.bases = [configured, ...reported.filter((b) => b !== configured)];
    if (!reported.includes(configured)) {
      const engine = list.find((c) => c.id === reported[0]);
      out.cards.unshift(configuredCard(configured, engine?.max_model_len ?? null));
    }
  }
  return out;
}

/** The card of a model known only from the configuration (vLLM's field set, kvroute's owner). */
function configuredCard(id: string, maxModelLen: number | null): ModelCard {
  return {
    id,
    object: 'model',
    created: Math.floor(Date.now() / 1000),
    owned_by: 'kvroute',
    root: id,
    parent: null,
    max_model_len: maxModelLen,
    permission: [],
  };
}

/** Cards merged by id, the first seen winning (every replica of a model lists the same). */
export function mergeCards(lists: Iterable<readonly ModelCard[]>): ModelCard[] {
  const byId = new Map<string, ModelCard>();
  for (const list of lists) for (const c of list) if (!byId.has(c.id)) byId.set(c.id, c);
  return [...byId.values()];
}
