/**
 * A backend's hardware (`gpu=`, `tp=`, `profile=` on --backend, the same keys in the config's
 * backends) becomes its speed in the router, the one the simulator gives a replica of that
 * hardware; bad values are one config error naming the key and the accepted values.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINE_DEFAULTS, makeEngineConfig } from '../../src/engine/options.ts';
import { backendSpeed } from '../../src/serving/backendSpeed.ts';
import { backendFromDoc, parseBackendFlag } from '../../src/serving/config.ts';
import { replicaSpeed } from '../../src/sim/replicaGroups.ts';

describe('backend hardware', () => {
  test('--backend ...,gpu=h100-sxm,tp=4: the simulator’s speed for that replica', () => {
    const b = parseBackendFlag('http://127.0.0.1:8001,gpu=h100-sxm,tp=4');
    assert.equal(b.gpu, 'h100-sxm');
    assert.equal(b.tp, 4);
    const sim = replicaSpeed(makeEngineConfig({ ...ENGINE_DEFAULTS, gpu: 'h100-sxm', tp: 4 }));
    assert.deepEqual(backendSpeed(b), sim);
    // The config's keys say the same.
    const doc = backendFromDoc(
      { url: 'http://127.0.0.1:8001', gpu: 'h100-sxm', tp: 4 },
      'backends[0]',
    );
    assert.deepEqual(backendSpeed(doc), sim);
  });

  test('no hardware named: no speed (replicas taken as alike)', () => {
    assert.equal(backendSpeed(parseBackendFlag('http://127.0.0.1:8001')), undefined);
  });

  test('a catalog model name on the backend sets the cost model', () => {
    const small = backendSpeed(parseBackendFlag('http://h:1,model=llama-3.1-8b,gpu=h200,tp=1'))!;
    const big = backendSpeed(parseBackendFlag('http://h:1,gpu=h200,tp=1'))!; // Llama 3.3 70B
    // Prefill scales with active parameters: 8.03e9 against 70.55e9.
    assert.equal(
      (big.prefillMsPerToken / small.prefillMsPerToken).toFixed(2),
      (70.55 / 8.03).toFixed(2),
    );
  });

  const refused: [() => unknown, RegExp][] = [
    [
      () => parseBackendFlag('http://h:1,gpu=h300'),
      /--backend gpu.*unknown GPU 'h300'; accepted: h100-sxm, h200/,
    ],
    [
      () => parseBackendFlag('http://h:1,tp=3'),
      /--backend tp.*must be a power of two \(1, 2, 4, 8, \.\.\.\), got '3'/,
    ],
    [
      () => parseBackendFlag('http://h:1,gpu=a10g,tp=1'),
      /--backend tp.*TP 1 does not fit Llama 3\.3 70B/,
    ],
    [() => parseBackendFlag('http://h:1,profile=/nonexistent.json'), /--backend profile/],
    [
      () => backendFromDoc({ url: 'http://h:1', gpu: 'tpu' }, 'backends[1]'),
      /backends\[1\]\.gpu.*unknown GPU 'tpu'/,
    ],
  ];
  for (const [make, message] of refused) {
    test(`refused: ${message.source}`, () => {
      assert.throws(make, (err: unknown) => {
        assert.match((err as Error).message, message);
        assert.ok(!(err as Error).message.includes('\n'));
        return true;
      });
    });
  }
});
