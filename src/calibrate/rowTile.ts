/**
 * Whether an engine computes a prompt chunk's attention over its context in whole tiles of query
 * rows, from paired probes. llama.cpp's CPU flash-attention kernel (ggml-cpu) multiplies 64-row
 * query tiles against 64-cell KV tiles, padding a partial query tile to a whole one, and runs a
 * chunk of fewer than 64 rows through a per-row vector path that is slower per pair. So on the
 * tiny model a 65-token chunk after 1,024 tokens reads the context as 128 rows would, and a
 * 32-token chunk costs about 3.7 times its pairs at the tiled rate. A GPU engine's kernels show
 * neither, to a few per cent.
 *
 * Calibrate times, after its longest warm context C, a chunk one token past a tile and a chunk of
 * half a tile, each right after the same chunk cold (as the pair rate's probes are). A pair's
 * difference over C x the pair rate at C reads as the rows the chunk was charged for; the median
 * over its pairs. Tiled when the first chunk reads as at least halfway from its own rows to the
 * tile's next multiple; then the short chunk's rows over its tokens are the short-chunk factor.
 * Pure: no I/O.
 */
import type { RowTiling } from '../model/stepTable.ts';

/** The query tile tested for: llama.cpp's CPU flash-attention kernel's. */
export const ROW_TILE = 64;

/** One chunk after `contextTokens` cached tokens beside the same chunk cold. */
export interface TilePair {
  chunkTokens: number;
  contextTokens: number;
  warmMs: number;
  coldMs: number;
}

/** The chunk sizes probed: one token past a tile, and half a tile. */
export const TILE_PROBE_TOKENS = [ROW_TILE + 1, ROW_TILE / 2] as const;

/**
 * The table's tiling from the probes' pairs and the pair rate at their context (ms per pair);
 * {} (no tiling) when the chunk past a tile reads as its own rows, or a probe is missing.
 */
export function rowTiling(
  pairs: readonly TilePair[],
  msPerPairAt: (c: number) => number,
): RowTiling {
  const [past, short] = TILE_PROBE_TOKENS;
  const pastRows = readRows(pairs, past, msPerPairAt);
  const shortRows = readRows(pairs, short, msPerPairAt);
  if (pastRows === null || shortRows === null) return {};
  const tiledRows = Math.ceil(past / ROW_TILE) * ROW_TILE;
  if (!(pastRows >= (past + tiledRows) / 2)) return {};
  return { attentionRowTile: ROW_TILE, shortChunkPairFactor: Math.max(1, shortRows / short) };
}

/** The median rows the chunks of `tokens` tokens read as, or null (none, or no rate). */
function readRows(
  pairs: readonly TilePair[],
  tokens: number,
  msPerPairAt: (c: number) => number,
): number | null {
  const rows: number[] = [];
  for (const p of pairs) {
    const rate = msPerPairAt(p.contextTokens);
    if (p.chunkTokens !== tokens || !(p.contextTokens > 0) || !(rate > 0)) continue;
    if (!Number.isFinite(p.warmMs) || !Number.isFinite(p.coldMs)) continue;
    rows.push((p.warmMs - p.coldMs) / (p.contextTokens * rate));
  }
  if (rows.length === 0) return null;
  rows.sort((a, b) => a - b);
  const mid = rows.length / 2;
  return rows.length % 2 === 1 ? rows[Math.floor(mid)]! : (rows[mid - 1]! + rows[mid]!) / 2;
}
