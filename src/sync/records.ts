/**
 * What gateways tell each other, as JSON. Small on purpose: one message per model pool per
 * flush (every 5 ms at most) carries every decision and release since the last one.
 *
 * route subject, `{"g": sender, "m": model, "r": [record...]}` with records
 *   ["r", id, replica, promptTokens, uncachedTokens, blockSize, fromBlock, [keys from fromBlock], lora|null]
 *   ["f", id]  its prefill ended (first token, or its prompt stored)
 *   ["d", id]  it ended: finished, failed, cancelled
 * or `{"g", "m", "s": [entry...]}`: the sender's whole in-flight set for the model (after a
 * reconnect, and every few seconds), replacing what the receiver held of it; entries
 *   [id, replica, promptTokens, uncachedTokens, blockSize, decoding 0|1, lora|null]
 * heartbeat subject, `{"g": sender, "k": commitment}`, or `{"g": sender, "bye": secret}` when it
 * stops (the secret whose SHA-256 its heartbeats carried: goodbye.ts).
 * snapshot reply (on `.snapshot.<responder>`), `{"g": responder, "p": [{"m": model, "e":
 * [[owner|null, ...entry]]}]}`: the responder's own in-flight entries (owner null); entries of
 * other owners are not taken (a peer speaks for its own entries only).
 *
 * Anything malformed is dropped whole (a peer of another version must not break routing), and so
 * is anything out of range (bounds.ts): a sender that is not one subject token, a name past 256
 * characters, a count past 4 Mi tokens, a block size past 4,096, more block keys than the prompt
 * has blocks.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { InFlightRecord, PeerRoute } from '../router/index.ts';
import { isBlockSize, isBoundedName, isPeerId, isTokenCount } from './bounds.ts';

export type Stage = 'prefill' | 'done';

export type RouteMessage =
  | { sender: string; model: string | null; routes: PeerRecord[] }
  | { sender: string; model: string | null; state: InFlightRecord[] };

export type PeerRecord =
  | { kind: 'route'; route: Omit<PeerRoute, 'peer'> }
  | { kind: Stage; requestId: string };

export interface SnapshotMessage {
  sender: string;
  pools: { model: string | null; entries: InFlightRecord[] }[];
}

type Entry = [string, string, number, number, number, 0 | 1, string | null];

export function entryOf(r: InFlightRecord): Entry {
  return [
    r.requestId,
    r.replica,
    r.promptTokens,
    r.uncachedTokens,
    r.blockSize,
    r.decoding ? 1 : 0,
    r.lora ?? null,
  ];
}

/** One decision as a route record: keys from the first block not cached where it went. */
export function routeRecord(
  requestId: string,
  replica: string,
  promptTokens: number,
  cachedTokens: number,
  blockSize: number,
  blockKeys: readonly BlockKey[],
  lora: string | undefined,
): unknown[] {
  const fromBlock = Math.floor(cachedTokens / blockSize);
  return [
    'r',
    requestId,
    replica,
    promptTokens,
    promptTokens - cachedTokens,
    blockSize,
    fromBlock,
    blockKeys.slice(fromBlock),
    lora ?? null,
  ];
}

export function encodeState(sender: string, model: string | null, records: InFlightRecord[]) {
  return JSON.stringify({ g: sender, m: model, s: records.map(entryOf) });
}

export function encodeSnapshot(message: SnapshotMessage): string {
  return JSON.stringify({
    g: message.sender,
    p: message.pools.map((p) => ({
      m: p.model,
      e: p.entries.map((r) => [r.peer, ...entryOf(r)]),
    })),
  });
}

const isCount = isTokenCount;
const isName = isBoundedName;
const isModel = (v: unknown): v is string | null =>
  v === null || (typeof v === 'string' && v.length <= 256);

function readEntry(e: unknown, peer: string | null): InFlightRecord | null {
  if (!Array.isArray(e) || e.length !== 7) return null;
  const [id, replica, prompt, uncached, blockSize, decoding, lora] = e;
  if (!isName(id) || !isName(replica) || !isCount(prompt) || !isCount(uncached)) return null;
  if (!isBlockSize(blockSize) || uncached > prompt) return null;
  if ((decoding !== 0 && decoding !== 1) || !(lora === null || isName(lora))) return null;
  return {
    peer,
    requestId: id,
    replica,
    promptTokens: prompt,
    uncachedTokens: uncached,
    blockSize,
    decoding: decoding === 1,
    ...(lora !== null && { lora }),
  };
}

function readRecord(r: unknown): PeerRecord | null {
  if (!Array.isArray(r)) return null;
  if ((r[0] === 'f' || r[0] === 'd') && r.length === 2 && isName(r[1])) {
    return { kind: r[0] === 'f' ? 'prefill' : 'done', requestId: r[1] };
  }
  if (r[0] !== 'r' || r.length !== 9) return null;
  const [, id, replica, prompt, uncached, blockSize, fromBlock, keys, lora] = r;
  if (!isName(id) || !isName(replica) || !isCount(prompt) || !isCount(uncached)) return null;
  if (!isBlockSize(blockSize) || uncached > prompt || !isCount(fromBlock)) return null;
  const blocks = Math.ceil(prompt / blockSize);
  if (fromBlock > blocks || !Array.isArray(keys) || keys.length > blocks - fromBlock) return null;
  if (!keys.every((k) => Number.isSafeInteger(k))) return null;
  if (!(lora === null || isName(lora))) return null;
  return {
    kind: 'route',
    route: {
      requestId: id,
      replica,
      promptTokens: prompt,
      uncachedTokens: uncached,
      blockSize,
      blockKeys: keys as BlockKey[],
      fromBlock,
      ...(lora !== null && { lora }),
    },
  };
}

/** A JSON object, or null (not JSON, or not an object). */
export function parse(data: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(data);
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

export function decodeRouteMessage(data: string): RouteMessage | null {
  const o = parse(data);
  if (o === null || !isPeerId(o.g) || !isModel(o.m)) return null;
  if (Array.isArray(o.r)) {
    const routes = o.r.map(readRecord);
    if (routes.some((r) => r === null)) return null;
    return { sender: o.g, model: o.m, routes: routes as PeerRecord[] };
  }
  if (Array.isArray(o.s)) {
    const state = o.s.map((e) => readEntry(e, o.g as string));
    if (state.some((e) => e === null)) return null;
    return { sender: o.g, model: o.m, state: state as InFlightRecord[] };
  }
  return null;
}

export interface Heartbeat {
  sender: string;
  /** SHA-256 (hex) of the sender's goodbye secret; absent from a peer that sends none. */
  commitment?: string;
  /** A goodbye: the secret revealed (`true` from an older peer: no proof, not honoured). */
  bye?: string | true;
}

const isHex64 = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);

export function decodeHeartbeat(data: string): Heartbeat | null {
  const o = parse(data);
  if (o === null || !isPeerId(o.g)) return null;
  if (o.k !== undefined && !isHex64(o.k)) return null;
  if (o.bye !== undefined && o.bye !== true && !isHex64(o.bye)) return null;
  return {
    sender: o.g,
    ...(o.k !== undefined && { commitment: o.k as string }),
    ...(o.bye !== undefined && { bye: o.bye as string | true }),
  };
}

export function decodeSnapshot(data: string): SnapshotMessage | null {
  const o = parse(data);
  if (o === null || !isPeerId(o.g) || !Array.isArray(o.p)) return null;
  const pools: SnapshotMessage['pools'] = [];
  for (const p of o.p as unknown[]) {
    const po = p as Record<string, unknown> | null;
    if (typeof po !== 'object' || po === null || !isModel(po.m) || !Array.isArray(po.e)) {
      return null;
    }
    const entries: InFlightRecord[] = [];
    for (const e of po.e as unknown[]) {
      if (!Array.isArray(e) || !(e[0] === null || isPeerId(e[0]))) return null;
      const entry = readEntry(e.slice(1), e[0] ?? null);
      if (entry === null) return null;
      entries.push(entry);
    }
    pools.push({ model: po.m, entries });
  }
  return { sender: o.g, pools };
}
