/**
 * What the online planners of a cluster tell each other (`--planner` with `--nats`), as JSON on
 * the planner subject of a pool (subjects.ts):
 *
 *   {"g": sender, "p": pool, "o": [[agoMs, promptTokens, outputTokens, [chunk keys]]...], "d": desired|null}
 *
 * `o`: the requests the sender served since its last message, each as the planner's window keeps
 * it (`src/planner/online/window.ts`), its arrival as `agoMs` before the message was sent, so the
 * receiver places it on its own clock (no clock shared between machines); `d`: the sender's own
 * count after its hysteresis (null before its first answer). Each receiver adds the requests to
 * its own window, so every planner searches the cluster's traffic, and answers the highest count
 * of itself and its live peers (src/serving/planner.ts).
 *
 * Anything malformed or out of range is dropped whole (bounds.ts): a sender that is not one
 * subject token, a pool name past 256 characters, more than MAX_SHARED_OBSERVATIONS requests, an
 * arrival older than a day, a count past 4 Mi tokens, more chunk keys than the prompt has
 * 256-token halves of a chunk, a count past MAX_SHARED_REPLICAS.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { Observation } from '../planner/online/window.ts';
import { TRACE_BLOCK_TOKENS } from '../workload/trace.ts';
import { isBoundedName, isPeerId, isTokenCount } from './bounds.ts';
import { parse } from './records.ts';

/** What one instance shares of a pool: the requests it observed and the count it wants. */
export interface PlannerMessage {
  sender: string;
  pool: string;
  /** The requests, their arrivals on the receiver's clock. */
  observations: Observation[];
  desired: number | null;
}

/** Most requests one message carries (a batch is split into messages of at most this many). */
export const MAX_SHARED_OBSERVATIONS = 256;
/** The oldest arrival a message may carry, ms before it was sent. */
export const MAX_SHARED_AGO_MS = 86_400_000;
/** The largest count a peer may answer. */
export const MAX_SHARED_REPLICAS = 65_536;

/**
 * Fewest tokens a chunk key covers: a chunk is the whole blocks nearest 512 tokens
 * (`chunkKeysOf`), at least 342 whatever the block size; half of 512 bounds it safely.
 */
const MIN_CHUNK_TOKENS = TRACE_BLOCK_TOKENS / 2;

type Wire = [number, number, number, BlockKey[]];

/** One message of `sender`'s batch for `pool`, sent at `nowMs` (the sender's clock). */
export function encodePlannerMessage(
  sender: string,
  pool: string,
  observations: readonly Observation[],
  desired: number | null,
  nowMs: number,
): string {
  const o: Wire[] = observations.map((x) => [
    Math.max(0, Math.round(nowMs - x.atMs)),
    x.promptTokens,
    x.outputTokens,
    [...x.chunkKeys],
  ]);
  return JSON.stringify({ g: sender, p: pool, o, d: desired });
}

/** A peer's message, its arrivals placed at `nowMs` (the receiver's clock); null if malformed. */
export function decodePlannerMessage(data: string, nowMs: number): PlannerMessage | null {
  const m = parse(data);
  if (m === null || !isPeerId(m.g) || !isBoundedName(m.p) || !Array.isArray(m.o)) return null;
  if (m.o.length > MAX_SHARED_OBSERVATIONS) return null;
  const d = m.d;
  if (
    !(
      d === null ||
      (Number.isInteger(d) && (d as number) >= 0 && (d as number) <= MAX_SHARED_REPLICAS)
    )
  ) {
    return null;
  }
  const observations: Observation[] = [];
  for (const w of m.o as unknown[]) {
    const o = readObservation(w, nowMs);
    if (o === null) return null;
    observations.push(o);
  }
  return { sender: m.g, pool: m.p, observations, desired: d as number | null };
}

function readObservation(w: unknown, nowMs: number): Observation | null {
  if (!Array.isArray(w) || w.length !== 4) return null;
  const [ago, prompt, output, keys] = w;
  if (!Number.isInteger(ago) || ago < 0 || ago > MAX_SHARED_AGO_MS) return null;
  if (!isTokenCount(prompt) || prompt < 1 || !isTokenCount(output)) return null;
  if (!Array.isArray(keys) || keys.length > Math.floor(prompt / MIN_CHUNK_TOKENS)) return null;
  if (!keys.every((k) => Number.isSafeInteger(k))) return null;
  return {
    atMs: nowMs - ago,
    promptTokens: prompt,
    outputTokens: output,
    chunkKeys: keys as BlockKey[],
  };
}
