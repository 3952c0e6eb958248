/** The autoscaling manifests against the planner's code: the endpoint, its JSON key, the gauge. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { parse } from 'yaml';

const read = (path: string) =>
  parse(readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8'));

test('the KEDA ScaledObject reads /planner/desired at desiredReplicas on the gateway Service', () => {
  const so = read('deploy/kubernetes/autoscaling/keda-scaledobject.yaml');
  const service = read('deploy/kubernetes/service.yaml');
  const planner = readFileSync(new URL('../../src/serving/planner.ts', import.meta.url), 'utf8');
  const trigger = so.spec.triggers[0];
  assert.equal(trigger.type, 'metrics-api');
  const url = new URL(trigger.metadata.url);
  assert.equal(url.pathname, '/planner/desired');
  assert.equal(Number(url.port), service.spec.ports[0].port);
  assert.ok(url.hostname.startsWith(`${service.metadata.name}.`));
  assert.equal(trigger.metadata.valueLocation, 'desiredReplicas');
  assert.match(planner, /desiredReplicas: one\?\.desiredReplicas/);
  assert.equal(so.spec.scaleTargetRef.name, 'kvroute-engine');
});

test('the HPA scales on the external metric the gateway exports', () => {
  const hpa = read('deploy/kubernetes/autoscaling/hpa-external.yaml');
  const planner = readFileSync(new URL('../../src/serving/planner.ts', import.meta.url), 'utf8');
  const metric = hpa.spec.metrics[0];
  assert.equal(metric.type, 'External');
  assert.equal(metric.external.metric.name, 'kvroute_planner_desired_replicas');
  assert.match(planner, /name: 'kvroute_planner_desired_replicas'/);
  assert.deepEqual(Object.keys(metric.external.metric.selector.matchLabels), ['pool']);
  assert.equal(hpa.spec.scaleTargetRef.name, 'kvroute-engine');
});
