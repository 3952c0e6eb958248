/**
 * The request path's counters and histograms (src/serving/metricSeries.ts) against prom-client's
 * own: the same operations on the same label sets must print the same exposition text, in the
 * Prometheus and in the OpenMetrics format, and read back the same through `getMetricsAsJSON`.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Counter, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { LabelledCounter, LabelledHistogram } from '../../src/serving/metricSeries.ts';

const BUCKETS = [0.005, 0.01, 0.05, 0.25, 1, 2.5];

interface Op {
  metric: 'counter' | 'histogram';
  labels: [string, string];
  value: number;
}

const labelValue = fc.constantFrom('a', 'b', 'none', 'tenant "x"', 'back\\slash', 'new\nline');
const op: fc.Arbitrary<Op> = fc.record({
  metric: fc.constantFrom('counter', 'histogram'),
  labels: fc.tuple(labelValue, labelValue),
  // Below, on and above the bounds, and beyond the last one (counted in +Inf only).
  value: fc.oneof(fc.constantFrom(...BUCKETS, 0, 3), fc.double({ min: 0, max: 5, noNaN: true })),
});

/** Both implementations, each in a registry of its own, and `apply` feeding both the same ops. */
function pair(contentType: RegistryContentType) {
  const ours = new Registry<RegistryContentType>();
  const theirs = new Registry<RegistryContentType>();
  ours.setContentType(contentType);
  theirs.setContentType(contentType);
  const counter = new LabelledCounter('c_total', 'a counter', ['model', 'tenant'], ours);
  const histogram = new LabelledHistogram(
    'h_seconds',
    'a histogram',
    BUCKETS,
    ['model', 'tenant'],
    ours,
  );
  const unlabelled = new LabelledHistogram('u_seconds', 'no labels', BUCKETS, [], ours);
  const pc = new Counter({
    name: 'c_total',
    help: 'a counter',
    labelNames: ['model', 'tenant'],
    registers: [theirs],
  });
  const ph = new Histogram({
    name: 'h_seconds',
    help: 'a histogram',
    buckets: BUCKETS,
    labelNames: ['model', 'tenant'],
    registers: [theirs],
  });
  const pu = new Histogram({
    name: 'u_seconds',
    help: 'no labels',
    buckets: BUCKETS,
    registers: [theirs],
  });
  const apply = (ops: Op[]) => {
    for (const { metric, labels, value } of ops) {
      const [model, tenant] = labels;
      if (metric === 'counter') {
        counter.series(model, tenant).inc(value);
        pc.labels(model, tenant).inc(value);
      } else {
        histogram.series(model, tenant).observe(value);
        ph.labels(model, tenant).observe(value);
        unlabelled.series().observe(value);
        pu.observe(value);
      }
    }
  };
  return { ours, theirs, apply };
}

function feed(ops: Op[], contentType: RegistryContentType) {
  const both = pair(contentType);
  both.apply(ops);
  return both;
}

describe('LabelledCounter and LabelledHistogram', () => {
  test('print what prom-client prints for the same operations, in both formats', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        for (const type of [Registry.PROMETHEUS_CONTENT_TYPE, Registry.OPENMETRICS_CONTENT_TYPE]) {
          const { ours, theirs } = feed(ops, type);
          assert.equal(await ours.metrics(), await theirs.metrics());
          assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON());
        }
      }),
      { numRuns: 150 },
    );
  });

  test('reset drops every series, an unlabelled one too, and later ones start again from zero, as in prom-client', async () => {
    const { ours, theirs, apply } = feed(
      [
        { metric: 'histogram', labels: ['a', 'b'], value: 0.2 },
        { metric: 'counter', labels: ['a', 'b'], value: 2 },
      ],
      Registry.PROMETHEUS_CONTENT_TYPE,
    );
    ours.resetMetrics();
    theirs.resetMetrics();
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.doesNotMatch(await ours.metrics(), /^u_seconds/m);
    apply([
      { metric: 'counter', labels: ['a', 'b'], value: 1 },
      { metric: 'histogram', labels: ['b', 'a'], value: 3 },
    ]);
    assert.equal(await ours.metrics(), await theirs.metrics());
    assert.match(await ours.metrics(), /^c_total\{model="a",tenant="b"\} 1$/m);
  });

  test('label values that would join alike stay apart', async () => {
    const { ours, theirs, apply } = pair(Registry.PROMETHEUS_CONTENT_TYPE);
    apply([
      { metric: 'counter', labels: ['a\u0000b', 'c'], value: 1 },
      { metric: 'counter', labels: ['a', 'b\u0000c'], value: 5 },
    ]);
    const text = await ours.metrics();
    assert.equal(text, await theirs.metrics());
    assert.equal(text.match(/^c_total\{/gm)?.length, 2);
  });

  test('refuse what prom-client refuses: a negative or infinite increment, a NaN observation, a wrong label count', () => {
    const registry = new Registry();
    const counter = new LabelledCounter('c_total', 'c', ['model'], registry);
    const histogram = new LabelledHistogram('h', 'h', BUCKETS, ['model'], registry);
    assert.throws(() => counter.series('m').inc(-1), /finite amount >= 0/);
    assert.throws(() => counter.series('m').inc(Number.POSITIVE_INFINITY), /finite amount >= 0/);
    assert.throws(() => histogram.series('m').observe(Number.NaN), /not a valid number/);
    assert.throws(() => counter.series('m', 'extra'), /expected 1 label values \(model\), got 2/);
    assert.throws(
      () => new LabelledCounter('c_total', 'again', [], registry),
      /already been registered/,
    );
  });
});
