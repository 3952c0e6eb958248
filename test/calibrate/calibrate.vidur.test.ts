/**
 * Calibration from Vidur's published H100 profile of Llama-2-70B (test/fixtures/vidur: 36 rows of
 * microsoft/vidur's mlp.csv at commit 7d47513, MIT licence). The calibrated model must predict
 * the measured per-step linear-layer time within 10 % at every num_tokens from 64 to 4,096 at
 * TP 1, 2 and 4, where the roofline defaults (50 % MFU, 75 % MBU) miss by more.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readProfile } from '../../src/calibrate/profileFile.ts';
import {
  calibrateFromVidur,
  guessFromVidurPath,
  linearParamsPerLayer,
  parseMlpCsv,
} from '../../src/calibrate/vidur.ts';
import { makeReplicaSpec } from '../../src/model/index.ts';
import { ROOT, runCli } from '../support/cli.ts';

const DIR = join(ROOT, 'test/fixtures/vidur/h100/meta-llama/Llama-2-70b-hf');
const spec = makeReplicaSpec({
  model: 'llama-2-70b',
  gpu: 'h100-sxm',
  tp: 1,
  weightsDtype: 'bf16',
  kvDtype: 'bf16',
});

describe('Vidur mlp.csv', () => {
  const rows = parseMlpCsv(join(DIR, 'mlp.csv'));

  test('36 rows; the linear ops of TP 1 at 4,096 tokens sum to 10.0865 ms per layer', () => {
    assert.equal(rows.length, 36);
    const first = rows.find((r) => r.tp === 1 && r.numTokens === 4096)!;
    // attn_pre_proj 0.9825 + attn_post_proj 0.7885 + mlp_up_proj 5.6685 + mlp_down_proj 2.647
    assert.ok(Math.abs(first.linearMsPerLayer - 10.0865) < 1e-9, String(first.linearMsPerLayer));
    assert.deepEqual(first.dims, {
      nHead: 64,
      nKvHead: 8,
      nEmbd: 8192,
      nExpandedEmbd: 28672,
      gatedMlp: true,
    });
    assert.equal(linearParamsPerLayer(first.dims), 855_638_016);
  });

  test('the folder names the GPU and the model', () => {
    assert.deepEqual(guessFromVidurPath(DIR), { gpu: 'h100-sxm', model: 'llama-2-70b' });
  });
});

describe('the calibrated model against the published times', () => {
  const profile = calibrateFromVidur({ dir: DIR, spec, objective: 'minimax' });

  test('one curve per TP degree in the file', () => {
    assert.deepEqual(
      profile.curves.map((c) => c.tp),
      [1, 2, 4, 8],
    );
  });

  for (const tp of [1, 2, 4]) {
    test(`TP ${tp}: within 10 % at every num_tokens 64..4096, the roofline worse`, () => {
      const curve = profile.curves.find((c) => c.tp === tp)!;
      const points = curve.points.filter((p) => p.tokensPerStep >= 64 && p.tokensPerStep <= 4096);
      assert.equal(points.length, 9); // 7 sizes, 2048 and 4096 measured twice
      for (const p of points) {
        assert.ok(Math.abs(p.errorPct) < 10, `${p.label}: calibrated ${p.errorPct.toFixed(1)} %`);
      }
      const worst = Math.max(...points.map((p) => Math.abs(p.errorPct)));
      const rooflineWorst = Math.max(...points.map((p) => Math.abs(p.rooflineErrorPct)));
      assert.ok(rooflineWorst > 10, `roofline misses by ${rooflineWorst.toFixed(1)} % at most`);
      assert.ok(rooflineWorst > worst);
      // Large steps run near 0.7 of BF16 peak, not the assumed 0.5; small ones far below.
      assert.ok(curve.mfuMax > 0.65 && curve.mfuMax < 0.8, String(curve.mfuMax));
      assert.equal(curve.overheadMs, 0);
      assert.ok(curve.fixed.includes('overheadMs'));
    });
  }

  test('a catalog model of another shape is refused', () => {
    const other = makeReplicaSpec({ model: 'llama-3.1-8b', gpu: 'h100-sxm', tp: 1 });
    assert.throws(
      () => calibrateFromVidur({ dir: DIR, spec: other, objective: 'minimax' }),
      /n_embd is 8192 but Llama 3.1 8B Instruct has 4096/,
    );
  });
});

describe('kvroute calibrate --vidur-profile', () => {
  test('writes the profile and the report; the file reads back as written', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'kvroute-vidur-'));
    try {
      const out = join(tmp, 'p.yaml');
      const report = join(tmp, 'r.html');
      const r = runCli(['calibrate', '--vidur-profile', DIR, '--out', out, '--report', report]);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /TP=1: MFU\(n\) = 0\.7\d\d x n/);
      assert.match(r.stdout, /roofline defaults: max error 5\d\.\d %/);
      const read = readProfile(out);
      assert.deepEqual(read, calibrateFromVidur({ dir: DIR, spec, objective: 'minimax' }));
      const html = readFileSync(report, 'utf8');
      assert.match(html, /<svg/);
      assert.match(html, /TP=4: every point/);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });

  const bad: [string[], RegExp][] = [
    [[], /give one of --url URL or --vidur-profile DIR/],
    [['--vidur-profile', '/nonexistent'], /--catalog-model is needed/],
    [
      ['--vidur-profile', '/nonexistent', '--catalog-model', 'llama-2-70b', '--gpu', 'h100-sxm'],
      /\/nonexistent\/mlp.csv not found/,
    ],
    [['--vidur-profile', DIR, '--tp', '2'], /--tp is for --url/],
    [['--vidur-profile', DIR, '--fit', 'best'], /--fit must be one of least-squares, minimax/],
    [['--url', 'ftp://x'], /--url must be http/],
  ];
  for (const [args, message] of bad) {
    test(`rejects ${args.join(' ') || 'no source'} with one line and exit 2`, () => {
      const r = runCli(['calibrate', ...args]);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    });
  }
});

describe('Vidur attention.csv', () => {
  test('decode rows become decode steps: the attention time plus the linear ops at the batch', () => {
    // A made-up attention.csv in the columns Vidur's profiler writes
    // (vidur/profiling/attention/attention_wrapper.py), for TP 2: decode attention reads the
    // batch's KV at 80 % of HBM bandwidth. Prefill rows are skipped.
    const tmp = mkdtempSync(join(tmpdir(), 'kvroute-attn-'));
    try {
      writeFileSync(join(tmp, 'mlp.csv'), readFileSync(join(DIR, 'mlp.csv')));
      const head =
        'time_stats.attn_decode.median,n_embd,n_q_head,n_kv_head,block_size,num_tensor_parallel_workers,max_model_len,batch_size,prefill_chunk_size,kv_cache_size,is_prefill,attention_backend';
      const rows = [
        [64, 1024],
        [128, 2048],
        [256, 4096],
      ].map(([batch, kv]) => {
        const bytesPerLayer = batch! * kv! * 2 * (8 / 2) * 128 * 2;
        const ms = (bytesPerLayer / (3.35e12 * 0.8)) * 1e3;
        return `${ms},8192,64,8,16,2,4096,${batch},0,${kv},False,FLASHINFER`;
      });
      rows.push('1.5,8192,64,8,16,2,4096,1,512,0,True,FLASHINFER');
      writeFileSync(join(tmp, 'attention.csv'), `${head}\n${rows.join('\n')}\n`);
      const profile = calibrateFromVidur({ dir: tmp, spec, objective: 'minimax' });
      assert.match(profile.source, /mlp\.csv and attention\.csv/);
      const tp2 = profile.curves.find((c) => c.tp === 2)!;
      const decodes = tp2.points.filter((p) => p.label.startsWith('decode'));
      assert.deepEqual(
        decodes.map((p) => [p.tokensPerStep, p.kvTokensRead]),
        [
          [64, 64 * 1024],
          [128, 128 * 2048],
          [256, 256 * 4096],
        ],
      );
      for (const p of tp2.points) assert.ok(Math.abs(p.errorPct) < 10, `${p.label}: ${p.errorPct}`);
      // TP 1 has no attention rows: mlp.csv alone.
      assert.equal(profile.curves[0]!.points.length, 9);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
