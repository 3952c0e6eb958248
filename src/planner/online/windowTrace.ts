/**
 * A window of live requests as a trace in the Mooncake format (`src/workload/trace.ts`, the
 * format `kvroute sim --trace` reads): one JSON line per request with its arrival `timestamp`
 * (ms from the window's first), `input_length`, `output_length` and `hash_ids`, one id per
 * 512-token chunk. Chunks the requests share get the same id, so the simulator replays the
 * window's prefix sharing; each request's partial last chunk gets an id of its own. The trace is
 * the window's fit by its empirical distribution: rate, lengths and sharing as they were.
 *
 * `timeScale` stretches the arrivals (2: half the rate), for the planner's scaled what-ifs.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import { TRACE_BLOCK_TOKENS } from '../../workload/trace.ts';
import type { Observation } from './window.ts';

export function windowTrace(obs: readonly Observation[], timeScale = 1): string {
  if (obs.length === 0) return '';
  const ids = new Map<BlockKey, number>();
  let nextId = 0;
  const t0 = obs[0]!.atMs;
  const lines: string[] = [];
  for (const o of obs) {
    const hashIds: number[] = [];
    for (const k of o.chunkKeys) {
      let id = ids.get(k);
      if (id === undefined) {
        id = nextId++;
        ids.set(k, id);
      }
      hashIds.push(id);
    }
    // The trace reader expects ceil(input_length / 512) ids: the partial chunk is unique.
    const chunks = Math.max(1, Math.ceil(o.promptTokens / TRACE_BLOCK_TOKENS));
    while (hashIds.length < chunks) hashIds.push(nextId++);
    hashIds.length = chunks;
    lines.push(
      JSON.stringify({
        timestamp: Math.max(0, Math.round((o.atMs - t0) * timeScale)),
        input_length: Math.max(1, o.promptTokens),
        output_length: Math.max(1, o.outputTokens),
        hash_ids: hashIds,
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}

/** Warm-up of a window's replay: a fifth of its span, at most a minute (as sim's default). */
export function warmupSOf(spanMs: number): number {
  return Math.min(60, Math.floor(spanMs / 5000));
}

/**
 * The chained keys of a prompt's full 512-token chunks from its block keys (computed with
 * `blockSize` tokens per block): the key of each chunk's last block.
 */
export function chunkKeysOf(blockKeys: readonly BlockKey[], blockSize: number): BlockKey[] {
  const perChunk = Math.max(1, Math.round(TRACE_BLOCK_TOKENS / blockSize));
  const out: BlockKey[] = [];
  for (let i = perChunk - 1; i < blockKeys.length; i += perChunk) out.push(blockKeys[i]!);
  return out;
}
