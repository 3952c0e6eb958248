/**
 * The endpoint picker's manifests (`deploy/kubernetes/epp/`) agree with the code and with the
 * inference extension's API: the InferencePool (inference.networking.k8s.io/v1) selects the
 * test fleet's pods on their serving port and names the picker's Service and ext_proc port; the
 * picker's args, container ports and Service use the code's default ports (9002, 9003, 9090);
 * its gRPC probes ask service names a live picker answers SERVING; its config passes
 * `--check-config` and lists the pods the pool selects; the HTTPRoute sends to the pool. Two
 * pickers, active-active: they share their ledgers through the NATS Deployment of nats.yaml.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { checkHealth } from '../../src/epp/dataPlane.ts';
import {
  DEFAULT_EPP_HEALTH_PORT,
  DEFAULT_EPP_METRICS_PORT,
  DEFAULT_EPP_PORT,
} from '../../src/epp/server.ts';
import { isClusterName } from '../../src/sync/subjects.ts';
import { ROOT, runCli } from '../support/cli.ts';
import { type EppFleetHandle, startTestEpp } from '../support/epp.ts';

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML, checked field by field
type Doc = any;

const manifests = (path: string): Doc[] =>
  parseAllDocuments(readFileSync(join(ROOT, path), 'utf8')).map((d) => {
    assert.equal(d.errors.length, 0, `${path}: ${d.errors.join('; ')}`);
    return d.toJS();
  });
const kustomization = manifests('deploy/kubernetes/epp/kustomization.yaml')[0];
const docs: Doc[] = kustomization.resources.flatMap((r: string) =>
  manifests(`deploy/kubernetes/epp/${r}`),
);
const fleet: Doc[] = manifests('deploy/kubernetes/test-fleet/engines.yaml');
const find = (kind: string, from: Doc[] = docs, name?: string): Doc => {
  const found = from.filter(
    (d) => d.kind === kind && (name === undefined || d.metadata.name === name),
  );
  assert.equal(found.length, 1, `one ${kind}${name ? ` ${name}` : ''}`);
  return found[0];
};
const pool = find('InferencePool');
const deployment = find('Deployment', docs, 'kvroute-epp');
const service = find('Service', docs, 'kvroute-epp');
const natsDeployment = find('Deployment', docs, 'kvroute-nats');
const natsService = find('Service', docs, 'kvroute-nats');
const configMap = find('ConfigMap', docs, 'kvroute-epp-config');
const natsConfigMap = find('ConfigMap', docs, 'kvroute-nats-config');
const route = find('HTTPRoute');
const gateway = find('Gateway');
const container = deployment.spec.template.spec.containers[0];
const argOf = (flag: string): string | undefined => {
  const at = container.args.indexOf(flag);
  return at < 0 ? undefined : container.args[at + 1];
};
const portNamed = (name: string): number =>
  container.ports.find((p: Doc) => p.name === name)?.containerPort;
const engines = find('StatefulSet', fleet);
const engineContainer = engines.spec.template.spec.containers[0];

/** The entries of `labels` named in `keys`. */
const pick = (labels: Record<string, string>, keys: Record<string, string>) =>
  Object.fromEntries(Object.keys(keys).map((k) => [k, labels[k]]));

describe('the endpoint picker manifests', () => {
  test('the InferencePool: v1, the fleet pods on their serving port, the picker by its Service', () => {
    assert.equal(pool.apiVersion, 'inference.networking.k8s.io/v1');
    assert.deepEqual(pool.spec.selector.matchLabels, engines.spec.template.metadata.labels);
    const servingPort = engineContainer.ports.find((p: Doc) => p.name === 'http').containerPort;
    assert.deepEqual(pool.spec.targetPorts, [{ number: servingPort }]);
    const ref = pool.spec.endpointPickerRef;
    assert.equal(ref.name, service.metadata.name);
    assert.ok(['FailOpen', 'FailClose'].includes(ref.failureMode));
    const grpc = service.spec.ports.find((p: Doc) => p.port === ref.port.number);
    assert.ok(grpc, 'the pool names a port of the Service');
    assert.equal(grpc.appProtocol, 'http2');
    assert.equal(portNamed(grpc.targetPort), DEFAULT_EPP_PORT);
  });

  test("the picker's args and ports are the code's defaults, as the reference picker's", () => {
    assert.equal(container.args[0], 'epp');
    assert.equal(argOf('--host'), '0.0.0.0', 'listens beyond loopback in a pod');
    assert.equal(Number(argOf('--port')), DEFAULT_EPP_PORT);
    assert.equal(Number(argOf('--health-port')), DEFAULT_EPP_HEALTH_PORT);
    assert.equal(Number(argOf('--metrics-port')), DEFAULT_EPP_METRICS_PORT);
    assert.deepEqual(
      [portNamed('grpc'), portNamed('grpc-health'), portNamed('metrics')],
      [9002, 9003, 9090],
    );
    for (const probe of [container.livenessProbe, container.readinessProbe]) {
      assert.equal(probe.grpc.port, DEFAULT_EPP_HEALTH_PORT);
    }
    assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
    const metrics = service.spec.ports.find((p: Doc) => p.name === 'http-metrics');
    assert.equal(portNamed(metrics.targetPort), DEFAULT_EPP_METRICS_PORT);
  });

  test('two pickers share their ledgers through the NATS Service', () => {
    assert.ok(deployment.spec.replicas >= 2, 'active-active');
    const url = new URL(argOf('--nats')!);
    assert.equal(url.protocol, 'nats:');
    assert.equal(url.hostname, natsService.metadata.name);
    const client = natsService.spec.ports.find((p: Doc) => p.port === Number(url.port));
    assert.ok(client, 'the URL names a port of the NATS Service');
    const nats = natsDeployment.spec.template.spec.containers[0];
    assert.deepEqual(natsService.spec.selector, natsDeployment.spec.selector.matchLabels);
    assert.deepEqual(
      natsDeployment.spec.selector.matchLabels,
      pick(natsDeployment.spec.template.metadata.labels, natsService.spec.selector),
    );
    const target = nats.ports.find((p: Doc) => p.name === client.targetPort);
    assert.equal(target.containerPort, Number(nats.args[nats.args.indexOf('--port') + 1]));
    assert.ok(isClusterName(argOf('--cluster')!), '--cluster is a valid cluster name');
    const help = runCli(['epp', '--help']);
    assert.equal(help.status, 0, help.stderr);
    for (const flag of ['--nats', '--cluster']) assert.ok(help.stdout.includes(flag), flag);
  });

  test('the pickers present the one NATS user the server admits, its password a mounted Secret', () => {
    const natsContainer = natsDeployment.spec.template.spec.containers[0];
    const conf: string = natsConfigMap.data['nats.conf'];
    const user = argOf('--nats-user')!;
    assert.match(conf, new RegExp(`user: ${user}, password: \\$KVROUTE_NATS_PASSWORD`));
    assert.match(conf, new RegExp(`"kvroute\\.${argOf('--cluster')}\\.>"`), 'its cluster only');
    const env = natsContainer.env.find((e: Doc) => e.name === 'KVROUTE_NATS_PASSWORD');
    const secret = env.valueFrom.secretKeyRef;
    const file = argOf('--nats-password-file')!;
    const mount = container.volumeMounts.find((m: Doc) => file.startsWith(`${m.mountPath}/`));
    const volume = deployment.spec.template.spec.volumes.find((v: Doc) => v.name === mount.name);
    assert.equal(volume.secret.secretName, secret.name);
    assert.deepEqual(volume.secret.items, [
      { key: secret.key, path: file.slice(mount.mountPath.length + 1) },
    ]);
    const confMount = natsContainer.volumeMounts.find((m: Doc) => m.name === 'config');
    assert.equal(
      natsContainer.args[natsContainer.args.indexOf('-c') + 1],
      `${confMount.mountPath}/nats.conf`,
    );
  });

  test('the image holds the .proto files the picker loads, and exposes its ports', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^COPY proto \.\/proto$/m);
    const exposed = /^EXPOSE (.*)$/m.exec(dockerfile)?.[1]?.split(/\s+/).map(Number) ?? [];
    for (const port of [DEFAULT_EPP_PORT, DEFAULT_EPP_HEALTH_PORT, DEFAULT_EPP_METRICS_PORT]) {
      assert.ok(exposed.includes(port), `EXPOSE ${port}`);
    }
  });

  test('the HTTPRoute sends to the pool, on the Gateway of these manifests', () => {
    const refs = route.spec.rules.flatMap((r: Doc) => r.backendRefs);
    assert.deepEqual(refs, [
      { group: 'inference.networking.k8s.io', kind: 'InferencePool', name: pool.metadata.name },
    ]);
    assert.deepEqual(route.spec.parentRefs, [
      { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: gateway.metadata.name },
    ]);
  });

  describe("the picker's config", () => {
    const config: string = configMap.data['kvroute.yaml'];
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-epp-deploy-'));
    after(() => rmSync(dir, { recursive: true, force: true }));

    test('is mounted where the args read it and passes --check-config', () => {
      const mount = container.volumeMounts.find((m: Doc) => m.name === 'config');
      const volume = deployment.spec.template.spec.volumes.find((v: Doc) => v.name === 'config');
      assert.equal(volume.configMap.name, configMap.metadata.name);
      assert.equal(argOf('--config'), `${mount.mountPath}/kvroute.yaml`);
      const path = join(dir, 'kvroute.yaml');
      writeFileSync(path, config);
      const out = runCli(['serve', '--check-config', path]);
      assert.equal(out.status, 0, out.stderr);
    });

    test('lists exactly the pods the pool selects, on its target port', () => {
      const urls = [...config.matchAll(/url: http:\/\/([\w-]+)-(\d+)\.([\w-]+):(\d+)/g)];
      assert.equal(urls.length, engines.spec.replicas, 'one backend per engine pod');
      const indexes = urls.map(([, set, index, svc, port]) => {
        assert.equal(set, engines.metadata.name);
        assert.equal(svc, engines.spec.serviceName);
        assert.equal(Number(port), pool.spec.targetPorts[0].number);
        return Number(index);
      });
      assert.deepEqual(
        indexes.sort(),
        Array.from({ length: engines.spec.replicas }, (_, i) => i),
      );
    });
  });

  describe('the probes against a live picker', () => {
    let epp: EppFleetHandle;
    before(async () => {
      epp = await startTestEpp(1);
    });
    after(() => epp?.close());

    test('every probed service name is SERVING on the health port', async () => {
      for (const probe of [container.livenessProbe, container.readinessProbe]) {
        assert.deepEqual(
          await checkHealth(`127.0.0.1:${epp.healthPort}`, probe.grpc.service),
          { status: 'SERVING' },
          probe.grpc.service,
        );
      }
    });
  });
});
