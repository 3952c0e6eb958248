/**
 * Calibration from a Vidur profile folder (microsoft/vidur, `data/profiling/compute/<sku>/<org>/
 * <model>/`), so published GPU measurements can be used without a GPU.
 *
 * `mlp.csv` holds, per `num_tokens` and `num_tensor_parallel_workers`, the GPU kernel time (ms) of
 * each op of one transformer layer's non-attention part on one TP shard (min/max/mean/median/std
 * over 20 repetitions). The per-step linear-layer time at n tokens and TP t is the sum of the
 * medians of the four linear ops, `attn_pre_proj` (QKV), `attn_post_proj` (O), `mlp_up_proj`
 * (gate and up) and `mlp_down_proj`, times the model's layers. The norms, rotary embedding, SiLU,
 * residual add and embedding are left out (about 7 % of the per-layer total at 4,096 tokens), and
 * so are the attention core, TP all-reduces and CPU overhead, which the file does not hold. Each
 * row is one step of n prefill tokens whose FLOPs are 2 x the linear parameters x n, computed from
 * the row's dimensions; the per-step overhead is held at 0 since the times are kernel times.
 *
 * `attention.csv`, where present, adds decode steps: a row with `is_prefill` false is a decode
 * batch of `batch_size` sequences of `kv_cache_size` tokens each, whose step time is its
 * `attn_decode` median plus the linear ops at `batch_size` tokens (interpolated in mlp.csv), per
 * layer, times the layers.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parse } from 'csv-parse/sync';
import { fitCurve, type Observation } from '../model/fit.ts';
import {
  type CostProfile,
  type FitObjective,
  type ModelSpec,
  PROFILE_FORMAT,
  type ProfileCurve,
  type ReplicaSpec,
} from '../model/index.ts';

export const VIDUR_LINEAR_OPS = [
  'attn_pre_proj',
  'attn_post_proj',
  'mlp_up_proj',
  'mlp_down_proj',
] as const;

export class VidurError extends Error {
  readonly code = 'ERR_VIDUR';
}

/** The layer shape a profile row was taken at. */
export interface VidurDims {
  nHead: number;
  nKvHead: number;
  nEmbd: number;
  nExpandedEmbd: number;
  gatedMlp: boolean;
}

export interface MlpRow {
  tp: number;
  numTokens: number;
  /** Sum of the linear ops' medians, ms per layer. */
  linearMsPerLayer: number;
  dims: VidurDims;
}

export interface AttentionDecodeRow {
  tp: number;
  batchSize: number;
  kvCacheSize: number;
  attnDecodeMsPerLayer: number;
}

/** Vidur's SKU folder names and model ids that the catalog holds. */
const VIDUR_GPUS: Record<string, string> = { h100: 'h100-sxm', a100: 'a100-80gb' };
const VIDUR_MODELS: Record<string, string> = { 'meta-llama/Llama-2-70b-hf': 'llama-2-70b' };

/** Catalog names read off a Vidur folder path `<sku>/<org>/<model>`, where it has them. */
export function guessFromVidurPath(dir: string): { gpu?: string; model?: string } {
  const abs = resolve(dir);
  // Own keys only: a folder named "constructor" names no GPU.
  const own = (table: Record<string, string>, key: string) =>
    Object.hasOwn(table, key) ? table[key] : undefined;
  const model = own(VIDUR_MODELS, `${basename(dirname(abs))}/${basename(abs)}`);
  const gpu = own(VIDUR_GPUS, basename(dirname(dirname(abs))));
  return { ...(gpu && { gpu }), ...(model && { model }) };
}

type CsvRecord = Record<string, string>;

function readCsv(path: string): CsvRecord[] {
  try {
    return parse(readFileSync(path), { columns: true, skip_empty_lines: true, trim: true });
  } catch (err) {
    throw new VidurError(`${path}: ${(err as Error).message}`);
  }
}

function numberAt(rec: CsvRecord, column: string, where: string): number {
  const raw = rec[column];
  const v = raw === undefined || raw === '' ? Number.NaN : Number(raw);
  if (!Number.isFinite(v)) {
    throw new VidurError(
      `${where}: column '${column}' is ${raw === undefined ? 'missing' : `'${raw}'`}`,
    );
  }
  return v;
}

export function parseMlpCsv(path: string): MlpRow[] {
  return readCsv(path).map((rec, i) => {
    const where = `${path} row ${i + 2}`;
    const linear = VIDUR_LINEAR_OPS.reduce(
      (sum, op) => sum + numberAt(rec, `time_stats.${op}.median`, where),
      0,
    );
    return {
      tp: numberAt(rec, 'num_tensor_parallel_workers', where),
      numTokens: numberAt(rec, 'num_tokens', where),
      linearMsPerLayer: linear,
      dims: {
        nHead: numberAt(rec, 'n_head', where),
        nKvHead: numberAt(rec, 'n_kv_head', where),
        nEmbd: numberAt(rec, 'n_embd', where),
        nExpandedEmbd: numberAt(rec, 'n_expanded_embd', where),
        gatedMlp: /^true$/i.test(rec.use_gated_mlp ?? ''),
      },
    };
  });
}

export function parseAttentionCsv(path: string): AttentionDecodeRow[] {
  return readCsv(path)
    .filter((rec) => /^false$/i.test(rec.is_prefill ?? ''))
    .map((rec, i) => {
      const where = `${path} decode row ${i + 1}`;
      return {
        tp: numberAt(rec, 'num_tensor_parallel_workers', where),
        batchSize: numberAt(rec, 'batch_size', where),
        kvCacheSize: numberAt(rec, 'kv_cache_size', where),
        attnDecodeMsPerLayer: numberAt(rec, 'time_stats.attn_decode.median', where),
      };
    });
}

/** Linear-layer parameters of one layer of this shape. */
export function linearParamsPerLayer(d: VidurDims): number {
  const headDim = d.nEmbd / d.nHead;
  const qkv = d.nEmbd * (d.nHead + 2 * d.nKvHead) * headDim;
  const out = d.nEmbd * d.nEmbd;
  const up = d.nEmbd * d.nExpandedEmbd * (d.gatedMlp ? 2 : 1);
  const down = d.nExpandedEmbd * d.nEmbd;
  return qkv + out + up + down;
}

/**
 * The model whose steps the profile times: the catalog model's layers with the profile's layer
 * shape, its parameters only the linear layers' (what the times cover). Throws when the catalog
 * model's shape differs from the profile's.
 */
export function profiledModel(catalog: ModelSpec, d: VidurDims): ModelSpec {
  const mismatch = [
    ['n_embd', d.nEmbd, catalog.hiddenSize],
    ['n_head', d.nHead, catalog.attentionHeads],
    ['n_kv_head', d.nKvHead, catalog.kvHeads],
  ].find(([, a, b]) => a !== b);
  if (mismatch) {
    throw new VidurError(
      `the profile's ${mismatch[0]} is ${mismatch[1]} but ${catalog.displayName} has ${mismatch[2]}; pick the profiled model with --catalog-model`,
    );
  }
  const params = linearParamsPerLayer(d) * catalog.layers;
  return {
    ...catalog,
    displayName: `${catalog.displayName} (linear layers)`,
    totalParams: params,
    activeParams: params,
  };
}

/** Linear-layer ms per layer at `tokens`, interpolated between the nearest profiled sizes. */
function linearMsAt(rows: MlpRow[], tokens: number): number {
  const sorted = [...rows].sort((a, b) => a.numTokens - b.numTokens);
  const hi = sorted.find((r) => r.numTokens >= tokens) ?? sorted[sorted.length - 1]!;
  const lo = [...sorted].reverse().find((r) => r.numTokens <= tokens) ?? sorted[0]!;
  if (hi.numTokens === lo.numTokens) return lo.linearMsPerLayer;
  const f = (tokens - lo.numTokens) / (hi.numTokens - lo.numTokens);
  return lo.linearMsPerLayer + f * (hi.linearMsPerLayer - lo.linearMsPerLayer);
}

/** One TP degree's rows as fit observations: mlp rows as prefill steps, attention rows as decode. */
export function vidurObservations(
  mlp: MlpRow[],
  attention: AttentionDecodeRow[],
  layers: number,
): Observation[] {
  const steps: Observation[] = mlp.map((r) => ({
    kind: 'step',
    label: `num_tokens ${r.numTokens}`,
    steps: [{ prefillTokens: r.numTokens, decodeTokens: 0, kvTokensRead: 0 }],
    perRequest: false,
    measuredMs: r.linearMsPerLayer * layers,
  }));
  const decodes: Observation[] = attention.map((r) => ({
    kind: 'step',
    label: `decode batch ${r.batchSize} x ${r.kvCacheSize} tokens`,
    steps: [
      { prefillTokens: 0, decodeTokens: r.batchSize, kvTokensRead: r.batchSize * r.kvCacheSize },
    ],
    perRequest: false,
    measuredMs: (r.attnDecodeMsPerLayer + linearMsAt(mlp, r.batchSize)) * layers,
  }));
  return [...steps, ...decodes];
}

export interface VidurInput {
  dir: string;
  /** The measured replica at TP 1 (catalog model, GPU, BF16); each TP's curve sets its own tp. */
  spec: ReplicaSpec;
  objective: FitObjective;
}

/** Fits one curve per TP degree in the folder's mlp.csv (and attention.csv where present). */
export function calibrateFromVidur(input: VidurInput): CostProfile {
  const mlpPath = join(input.dir, 'mlp.csv');
  if (!existsSync(mlpPath)) throw new VidurError(`${mlpPath} not found`);
  const mlp = parseMlpCsv(mlpPath);
  if (mlp.length === 0) throw new VidurError(`${mlpPath} has no rows`);
  const attentionPath = join(input.dir, 'attention.csv');
  const attention = existsSync(attentionPath) ? parseAttentionCsv(attentionPath) : [];
  const model = profiledModel(input.spec.model, mlp[0]!.dims);
  const tps = [...new Set(mlp.map((r) => r.tp))].sort((a, b) => a - b);
  const curves: ProfileCurve[] = tps.map((tp) => {
    const spec: ReplicaSpec = { ...input.spec, model, tp };
    const observations = vidurObservations(
      mlp.filter((r) => r.tp === tp),
      attention.filter((r) => r.tp === tp),
      model.layers,
    );
    return fitCurve(spec, observations, { objective: input.objective, overheadMs: 0 });
  });
  const files = attention.length > 0 ? 'mlp.csv and attention.csv' : 'mlp.csv';
  return {
    format: PROFILE_FORMAT,
    source: `Vidur profile ${resolve(input.dir)} (${files})`,
    method:
      `per-step linear-layer time = (${VIDUR_LINEAR_OPS.join(' + ')}) medians x ${model.layers} layers; ` +
      `FLOPs = 2 x ${linearParamsPerLayer(mlp[0]!.dims).toLocaleString('en-US')} linear parameters per layer x tokens; ` +
      'per-step overhead held at 0 (GPU kernel times); one curve per TP degree',
    measuredOn: {
      model: input.spec.model.name,
      gpu: input.spec.gpu.name,
      weightsDtype: input.spec.weightsDtype,
      kvDtype: input.spec.kvDtype,
    },
    curves,
  };
}
