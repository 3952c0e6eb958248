/**
 * Faults the engine server can be told to have, so the router's self-audit
 * (`src/router/audit/`) can be shown to catch them. Each is a way a real engine's cache and the
 * router's index have been seen to drift apart:
 * - `dropEvents`: KV events of a kind are never published (nor kept for replay): an event
 *   stream with loss, or a publisher that skips them;
 * - `silentResetS`: every N seconds of modelled time the prefix cache is emptied with no
 *   `AllBlocksCleared` and no sequence restart (a restart or sleep mode the router is not told of);
 * - `lie`: a consistent liar: every prompt's blocks are published as stored when it arrives
 *   (before any is computed), no `BlockRemoved` is ever published, and `cached_tokens` reports
 *   the whole prompt, so the router's predictions and the engine's reports always agree (the
 *   audit catches it by the speed of its "hits" and its index outgrowing its KV pool);
 * - `chatTemplate`: chats are rendered for generation with this Jinja template, while
 *   `/tokenize` keeps the configured one (so the gateway's tokenizer probe does not notice).
 * A differing engine hash seed is not a fault here: kvroute keys its index on the token ids in
 * `BlockStored`, never on the engine's hashes.
 */
import { computeBlockKeys } from '../../kv/blockKey.ts';
import type { BlockStored, KvEvent } from '../../kv/events.ts';

export const DROP_EVENT_KINDS = ['removed', 'stored', 'all'] as const;
export type DropEventKind = (typeof DROP_EVENT_KINDS)[number];

export interface EngineFaults {
  dropEvents?: DropEventKind;
  silentResetS?: number;
  lie?: boolean;
  chatTemplate?: string;
}

/** The kind of events a replica with these faults never publishes (a liar: its removals). */
export function droppedKind(faults: EngineFaults): DropEventKind | undefined {
  return faults.lie === true ? (faults.dropEvents ?? 'removed') : faults.dropEvents;
}

/** The events a publisher with the fault sends: those of the dropped kind are gone. */
export function withDroppedEvents(events: KvEvent[], drop: DropEventKind | undefined): KvEvent[] {
  if (drop === undefined || events.length === 0) return events;
  if (drop === 'all') return [];
  const type = drop === 'removed' ? 'BlockRemoved' : 'BlockStored';
  return events.filter((e) => e.type !== type);
}

/**
 * The liar's event for a prompt on arrival: every full block of it stored, chained from the
 * root (keyed by salt and adapter as the block pool keys them); null when it has no full block.
 */
export function liarStoredEvent(
  promptTokens: readonly number[],
  blockSize: number,
  scope: { cacheSalt: string | null; loraName: string | null },
): BlockStored | null {
  const blockKeys = computeBlockKeys(promptTokens, blockSize, {
    cacheSalt: scope.cacheSalt ?? undefined,
    loraName: scope.loraName ?? undefined,
  });
  if (blockKeys.length === 0) return null;
  return {
    type: 'BlockStored',
    blockKeys,
    parentKey: null,
    tokenIds: promptTokens.slice(0, blockKeys.length * blockSize),
    blockSize,
    loraName: scope.loraName,
    cacheSalt: scope.cacheSalt,
  };
}
