/**
 * Direct probes of llama.cpp through node-llama-cpp, outside kvroute's engine: what a step costs
 * by the shape of its chunks, the facts behind the step table's `attentionRowTile`,
 * `shortChunkPairFactor` and the runtime's sampler options (docs/calibration.md).
 *
 *   node --import tsx bench/llamaCppProbes.ts [--reps 5] [--only E0,E1,E2,E3,E4,E5] [--fa auto|false]
 *     [--mmap auto|false] [--kv-debug] [--sequences 8] [--clock cpu|wall]
 *
 * Same shape as bench:real's fidelity engine: the tiny model, 1 thread, batch 256, 8 sequences
 * (maxSeqs 4 + 4 cache sequences) of 4,096 tokens. One JSON line per measurement on stdout,
 * summaries on stderr; about 1 to 2 minutes on one core. Times are the process's CPU time per
 * evaluation by default (llama.cpp's one thread and the main thread: a busy host's preemption
 * does not count), `--clock wall` for elapsed time.
 *
 * E0  facts: llama.cpp's own log lines (n_ctx, n_ctx_seq, kv_unified, flash attention resolved).
 * E1  H1, FA tiling: chunk of n tokens after c = 0 / 1,024, no sample, n around multiples of 64.
 *     H1 predicts ctxMs(n) = t(1024,n) - t(0,n) flat within (64k, 64k+64] and a higher
 *     per-pair cost below 64 rows (vector path); refuted if ctxMs grows smoothly with n.
 * E2  H2, output cost: the same chunk with / without sampling (the runtime's former knobs:
 *     temperature 1, topK 0 -> whole vocabulary, topP 1, minP 0; greedy; and `off`, the knobs as
 *     null, as the runtime passes them now) at c = 0 / 512 / 1,024; n = 1 is a decode.
 * E3  H3, idle and placement: 132 @ 1,024 with sample back to back, after 3 s idle, an inner
 *     chunk after idle as control, and after a state copy (save/load) instead of in-place erase.
 * E5  H5, page size: a prompt of 1,113 to 1,363 tokens (ids over the whole vocabulary) in
 *     256-token chunks, no sample, then three decodes with sample: the first is the first step
 *     since the prompt began to compute logits (it reads the whole 65 MB output matrix again).
 *     On 4 KiB pages it ran 25 -> 40 to 80 ms about half the time in a machine's first half hour
 *     after start (none an hour later). Run it both ways, with `--clock wall`:
 *     `... --only E5 --clock wall` (mmap'd weights) against
 *     `GLIBC_TUNABLES=glibc.malloc.hugetlb=1 ... --only E5 --clock wall --mmap false` (the
 *     engine's setting, src/cli/hugePages.ts). Also prints the process's AnonHugePages.
 * E4  H4, two chunks in one step: consecutive sequence ids (llama.cpp's split_equal pairs them
 *     into one ubatch of equal lengths plus a tail) against non-consecutive ids.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ControlledEvaluateInputItem,
  getLlama,
  type LlamaContextSequence,
  LlamaLogLevel,
  type Token,
} from 'node-llama-cpp';
import { PlanBatching } from '../src/engine/runtime/llamaCpp/batching.ts';
import { tinyModelPath } from '../test/support/tinyModel.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('llamaCppProbes', {
  reps: { type: 'string' },
  only: { type: 'string' },
  fa: { type: 'string' },
  mmap: { type: 'string' },
  sequences: { type: 'string' },
  context: { type: 'string' },
  'table-sample': { type: 'string' },
  'kv-debug': { type: 'boolean' },
  clock: { type: 'string' },
});
const flags = benchFlags('llamaCppProbes');
const REPS = flags.positiveInt('reps', values.reps, 5);
const ONLY = new Set(flags.list('only', values.only, ['E0', 'E1', 'E2', 'E3', 'E4', 'E5']));
const FA = values.fa === 'false' ? false : 'auto';
const MMAP = values.mmap === 'false' ? false : 'auto';
const SEQUENCES = flags.positiveInt('sequences', values.sequences, 8);
const CONTEXT = flags.positiveInt('context', values.context, 4096);
const TABLE_SAMPLE_MS = flags.positiveNumber('table-sample', values['table-sample'], 9);
const KV_DEBUG = values['kv-debug'] === true;
// cpu: the process's CPU time (llama.cpp's one thread and the main thread), which a busy host's
// preemption does not inflate; wall: elapsed time.
const CLOCK = flags.list('clock', values.clock, ['cpu', 'wall'])[0] ?? 'cpu';
const clock = (): number => {
  if (CLOCK === 'wall') return performance.now();
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const PREFIX = 1024;
const log = (line: string) => process.stderr.write(`${line}\n`);
const emit = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

// Fresh token ids in [1000, 30000), as calibrate's probes use (a seeded LCG: same run, same ids).
let rngState = 27;
const fresh = (n: number): number[] =>
  Array.from({ length: n }, () => {
    rngState = (Math.imul(rngState, 1664525) + 1013904223) >>> 0;
    return 1000 + (rngState % 29000);
  });

// llama.cpp's log: keep the lines that state the facts of question 1 and (with --kv-debug,
// LLAMA_KV_CACHE_DEBUG=1) find_slot's per-ubatch line: stream, used_max_p1 ("n"), used, head.
if (KV_DEBUG) process.env.LLAMA_KV_CACHE_DEBUG = '1';
const facts: string[] = [];
let slotLines: string[] = [];
const llama = await getLlama({
  build: 'never',
  gpu: false,
  progressLogs: false,
  logLevel: KV_DEBUG ? LlamaLogLevel.debug : LlamaLogLevel.info,
  logger: (_level, message) => {
    const m = message.trim();
    if (/find_slot: stream/.test(m)) slotLines.push(m);
    else if (
      /n_ctx|n_seq_max|kv_unified|flash_attn|Flash Attention|llama_kv_cache|n_ubatch/.test(m)
    )
      facts.push(m);
  },
});
const model = await llama.loadModel({
  modelPath: await tinyModelPath(),
  gpuLayers: 0,
  useMmap: MMAP,
});
const batching = new PlanBatching(false);
const context = await model.createContext({
  sequences: SEQUENCES,
  contextSize: CONTEXT,
  batchSize: 256,
  threads: { ideal: 1, min: 1 },
  flashAttention: FA,
  batching: { itemPrioritizationStrategy: batching.strategy },
});
const seqs = Array.from({ length: SEQUENCES }, () => context.getSequence());
const stateDir = mkdtempSync(join(tmpdir(), 'kvroute-llama-probes-'));

type Sample = 'none' | 't1' | 'greedy' | 'off';
let seed = 1;
function items(tokens: number[], sample: Sample): ControlledEvaluateInputItem[] {
  const out = tokens.slice() as Token[] as ControlledEvaluateInputItem[];
  if (sample === 'none') return out;
  const options =
    sample === 'greedy'
      ? { temperature: 0 }
      : sample === 'off'
        ? {
            temperature: 1,
            topK: null as unknown as number,
            topP: null as unknown as number,
            minP: 0,
            seed: seed++,
          }
        : { temperature: 1, topK: 0, topP: 1, minP: 0, seed: seed++ }; // runtime.ts's knobs
  out[out.length - 1] = [
    tokens[tokens.length - 1]! as Token,
    { generateNext: { token: true, options } },
  ];
  return out;
}
/** Computes n fresh tokens in 256-token chunks (inner chunks, no sample). */
async function fill(
  seq: LlamaContextSequence,
  n: number,
  base: number[] = fresh(n),
): Promise<number[]> {
  for (let i = 0; i < base.length; i += 256)
    await seq.controlledEvaluate(items(base.slice(i, i + 256), 'none'));
  return base;
}
/** Back to the first `keep` tokens (in place, as the runtime erases past a kept prefix). */
async function restore(seq: LlamaContextSequence, keep: number): Promise<void> {
  if (keep === 0) await seq.clearHistory();
  else if (seq.nextTokenIndex > keep)
    await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
}
/** Wall time of one evaluation of n fresh tokens with `sample`, then the sequence restored. */
async function timed(
  seq: LlamaContextSequence,
  keep: number,
  n: number,
  sample: Sample,
): Promise<number> {
  const t0 = clock();
  await seq.controlledEvaluate(items(fresh(n), sample));
  const ms = clock() - t0;
  await restore(seq, keep);
  return ms;
}
const shuffle = <T>(xs: T[]): T[] => {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    rngState = (Math.imul(rngState, 1664525) + 1013904223) >>> 0;
    const j = rngState % (i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
};

// Sequence 0 holds the 1,024-token prefix (c = 1,024); sequence 2 is used at c = 0 and 512.
const prefix = await fill(seqs[0]!, PREFIX);
for (let i = 0; i < 3; i++) await timed(seqs[0]!, PREFIX, 128, 't1'); // warm-up
log(
  `load average ${loadavg()[0]!.toFixed(2)}; FA option ${String(FA)}, mmap ${String(MMAP)}, contextSize ${context.contextSize}`,
);

if (ONLY.has('E0')) {
  for (const f of facts) log(`E0 ${f}`);
  emit({
    e: 'E0',
    contextSize: context.contextSize,
    sequences: SEQUENCES,
    flashAttentionOption: context.flashAttention,
    facts,
  });
}

if (ONLY.has('E1')) {
  const ns = [32, 48, 63, 64, 65, 96, 127, 128, 129, 132, 160, 192, 193, 224, 255, 256];
  const sampled = [63, 64, 65, 128, 129, 132, 192, 193, 256];
  const t = new Map<string, number[]>();
  const put = (k: string, ms: number) => t.set(k, [...(t.get(k) ?? []), ms]);
  for (let r = 0; r < REPS; r++) {
    for (const n of shuffle(ns)) {
      put(`0/${n}/none`, await timed(seqs[2]!, 0, n, 'none'));
      put(`1024/${n}/none`, await timed(seqs[0]!, PREFIX, n, 'none'));
    }
    for (const n of shuffle(sampled)) put(`1024/${n}/t1`, await timed(seqs[0]!, PREFIX, n, 't1'));
  }
  const rate256 = (median(t.get('1024/256/none')!) - median(t.get('0/256/none')!)) / (256 * PREFIX);
  log('E1 n  cold  @1024  ctxMs  ms/kpair  tableCtxMs(n*c*rate256)  H1 predicts (rows)');
  for (const n of ns) {
    const cold = median(t.get(`0/${n}/none`)!);
    const warm = median(t.get(`1024/${n}/none`)!);
    const rows = n >= 64 ? Math.ceil(n / 64) * 64 : Number.NaN; // NaN: vector path, no tiles
    const row = {
      e: 'E1',
      n,
      coldMs: cold,
      warmMs: warm,
      ctxMs: warm - cold,
      msPerKPair: ((warm - cold) / (n * PREFIX)) * 1000,
      tableCtxMs: n * PREFIX * rate256,
      h1CtxMs: Number.isNaN(rows) ? null : rows * PREFIX * rate256,
      sampledMs: t.has(`1024/${n}/t1`) ? median(t.get(`1024/${n}/t1`)!) : null,
    };
    emit(row);
    log(
      `E1 ${n} ${cold.toFixed(1)} ${warm.toFixed(1)} ${row.ctxMs.toFixed(1)} ${row.msPerKPair.toFixed(3)} ${row.tableCtxMs.toFixed(1)} ${row.h1CtxMs?.toFixed(1) ?? 'vec'}`,
    );
  }
}

if (ONLY.has('E2')) {
  // c = 512 in sequence 2: fill 512, measure, restore to 512; c = 0 also in sequence 2.
  const out: Record<string, number[]> = {};
  const put = (k: string, ms: number) => {
    out[k] = [...(out[k] ?? []), ms];
  };
  for (let r = 0; r < REPS; r++) {
    for (const n of [1, 64, 132, 256]) {
      for (const s of ['none', 't1', 'greedy', 'off'] as Sample[]) {
        put(`0/${n}/${s}`, await timed(seqs[2]!, 0, n, s));
        put(`1024/${n}/${s}`, await timed(seqs[0]!, PREFIX, n, s));
      }
    }
    await fill(seqs[2]!, 512);
    for (const n of [1, 64, 132, 256])
      for (const s of ['none', 't1', 'greedy'] as Sample[])
        put(`512/${n}/${s}`, await timed(seqs[2]!, 512, n, s));
    await restore(seqs[2]!, 0);
  }
  log(`E2 c n none t1 greedy | t1-none greedy-none (table msPerPromptSample ${TABLE_SAMPLE_MS})`);
  for (const c of [0, 512, 1024])
    for (const n of [1, 64, 132, 256]) {
      const [a, b, g, f] = (['none', 't1', 'greedy', 'off'] as Sample[]).map((s) =>
        median(out[`${c}/${n}/${s}`] ?? [Number.NaN]),
      );
      emit({
        e: 'E2',
        c,
        n,
        noneMs: a,
        t1Ms: b,
        greedyMs: g,
        sampleMs: b! - a!,
        greedySampleMs: g! - a!,
      });
      log(
        `E2 ${c} ${n} ${a!.toFixed(1)} ${b!.toFixed(1)} ${g!.toFixed(1)} off ${f!.toFixed(1)} | ${(b! - a!).toFixed(1)} ${(g! - a!).toFixed(1)} off ${(f! - a!).toFixed(1)}`,
      );
    }
}

if (ONLY.has('E3')) {
  const n = 132;
  const res: Record<string, number[]> = {
    backToBack: [],
    afterIdle: [],
    innerBackToBack: [],
    innerAfterIdle: [],
    afterCopy: [],
    copyPlacement: [],
  };
  for (let r = 0; r < REPS; r++) {
    res.backToBack!.push(await timed(seqs[0]!, PREFIX, n, 't1'));
    res.innerBackToBack!.push(await timed(seqs[0]!, PREFIX, 256, 'none'));
    await sleep(3000);
    res.afterIdle!.push(await timed(seqs[0]!, PREFIX, n, 't1'));
    await sleep(3000);
    res.innerAfterIdle!.push(await timed(seqs[0]!, PREFIX, 256, 'none'));
    // State copy, as the runtime places an admission whose prefix another sequence holds:
    // sequence 4 gets sequence 0's state (1,024 tokens) by file, then the chunk runs there.
    const file = join(stateDir, `copy-${r}.state`);
    const p0 = performance.now();
    await seqs[0]!.saveStateToFile(file);
    await seqs[4]!.loadStateFromFile(file, { acceptRisk: true });
    res.copyPlacement!.push(performance.now() - p0);
    slotLines = [];
    res.afterCopy!.push(await timed(seqs[4]!, PREFIX, n, 't1'));
    if (KV_DEBUG) for (const l of slotLines) log(`E3 copy ${l}`);
    await restore(seqs[4]!, 0);
    rmSync(file, { force: true });
  }
  for (const [k, v] of Object.entries(res)) {
    emit({ e: 'E3', what: k, medianMs: median(v), all: v });
    log(`E3 ${k}: ${median(v).toFixed(1)} ms (${v.map((x) => x.toFixed(0)).join(', ')})`);
  }
}

if (ONLY.has('E4')) {
  // Sequence ids follow getSequence() order: seqs[1] is id 1 (next to 0), seqs[3] is id 3.
  const run = async (pair: LlamaContextSequence | null, alone: boolean) => {
    batching.take();
    const t0 = performance.now();
    const a = seqs[0]!.controlledEvaluate(items(fresh(132), 't1'));
    const b = pair ? pair.controlledEvaluate(items(fresh(124), 'none')) : null;
    await Promise.all([a, b]);
    const ms = performance.now() - t0;
    const batches = batching.take().length;
    await restore(seqs[0]!, PREFIX);
    if (pair) await restore(pair, 0);
    return { ms, batches, alone };
  };
  const out: Record<string, number[]> = { A: [], B: [], consecutive: [], nonConsecutive: [] };
  for (let r = 0; r < REPS; r++) {
    out.A!.push((await run(null, true)).ms);
    const t0 = performance.now();
    await seqs[1]!.controlledEvaluate(items(fresh(124), 'none'));
    out.B!.push(performance.now() - t0);
    await restore(seqs[1]!, 0);
    const c = await run(seqs[1]!, false);
    const nc = await run(seqs[3]!, false);
    if (c.batches !== 1 || nc.batches !== 1)
      log(`E4 warning: ${c.batches} / ${nc.batches} batches (expected 1)`);
    out.consecutive!.push(c.ms);
    out.nonConsecutive!.push(nc.ms);
  }
  const m = Object.fromEntries(Object.entries(out).map(([k, v]) => [k, median(v)]));
  emit({ e: 'E4', ...m, sumAlone: m.A! + m.B! });
  log(
    `E4 132@1024+sample alone ${m.A!.toFixed(1)}, 124@0 alone ${m.B!.toFixed(1)}, sum ${(m.A! + m.B!).toFixed(1)}; together: ids 0+1 ${m.consecutive!.toFixed(1)}, ids 0+3 ${m.nonConsecutive!.toFixed(1)}`,
  );
}

if (ONLY.has('E5')) {
  const first: number[] = [];
  const later: number[] = [];
  for (let r = 0; r < REPS * 4; r++) {
    const seq = seqs[r % SEQUENCES]!;
    await restore(seq, 0);
    // Ids over the whole vocabulary (calibrate's probes keep to [1000, 30000)).
    await fill(
      seq,
      0,
      Array.from(
        { length: 1113 + 50 * (r % 6) },
        (_, i) => 1000 + ((i * 7919 + r * 104_729) % 126_000),
      ),
    );
    for (let d = 0; d < 3; d++) {
      const t0 = clock();
      await seq.controlledEvaluate(items(fresh(1), 'off'));
      (d === 0 ? first : later).push(clock() - t0);
    }
  }
  const hugeKb = /AnonHugePages:\s+(\d+)/.exec(readFileSync('/proc/self/smaps_rollup', 'utf8'));
  const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
  const o = {
    e: 'E5',
    glibcTunables: process.env.GLIBC_TUNABLES ?? null,
    mmap: MMAP,
    anonHugePagesMb: hugeKb ? Number(hugeKb[1]) / 1024 : null,
    firstDecodeMs: { median: median(first), p90: p90(first), max: Math.max(...first) },
    laterDecodeMs: { median: median(later), p90: p90(later), max: Math.max(...later) },
    slowFirst: first.filter((x) => x > 2 * median(later)).length,
    of: first.length,
  };
  emit(o);
  log(`E5 ${JSON.stringify(o)}`);
}

log(`load average at the end ${loadavg()[0]!.toFixed(2)}`);
void prefix;
await context.dispose();
await model.dispose();
rmSync(stateDir, { recursive: true, force: true });
process.exit(0);
