/**
 * The shipping files agree with the code: the Dockerfile, the Kubernetes manifests and the
 * Grafana dashboard are parsed, their ports and probe paths checked against the gateway's and
 * the engine's defaults and live routes, the ConfigMap's config against `kvroute serve
 * --check-config`, and every metric the dashboard queries against a live gateway's and engine's
 * /metrics. (No image is built here: that needs a container engine.)
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { DEFAULT_PORT } from '../../src/serving/config.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
} from '../support/gateway.harness.ts';
import { ROOT, runCli } from '../support/cli.ts';

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML, checked field by field
type Doc = any;

const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const manifests = (path: string): Doc[] =>
  parseAllDocuments(read(path)).map((d) => {
    assert.equal(d.errors.length, 0, `${path}: ${d.errors.join('; ')}`);
    return d.toJS();
  });
const K8S = [
  'deploy/kubernetes/configmap.yaml',
  'deploy/kubernetes/gateway.yaml',
  'deploy/kubernetes/service.yaml',
  'deploy/kubernetes/monitoring/servicemonitor.yaml',
  'deploy/kubernetes/test-fleet/engines.yaml',
];
const docs = K8S.flatMap(manifests);
const find = (kind: string, name: string): Doc => {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  assert.ok(doc, `${kind} ${name}`);
  return doc;
};
const gatewayDeployment = find('Deployment', 'kvroute');
const gatewayContainer = gatewayDeployment.spec.template.spec.containers[0];
const engineSet = find('StatefulSet', 'kvroute-engine');
const engineContainer = engineSet.spec.template.spec.containers[0];
const configMap = find('ConfigMap', 'kvroute-config');
const portNamed = (container: Doc, name: string): number =>
  container.ports.find((p: Doc) => p.name === name)?.containerPort;
/** `--flag VALUE` in a container's args. */
const argOf = (container: Doc, flag: string): string | undefined => {
  const at = container.args.indexOf(flag);
  return at < 0 ? undefined : container.args[at + 1];
};
const probes = (c: Doc): Doc[] => [c.readinessProbe, c.livenessProbe];

describe('Dockerfile', () => {
  const text = read('Dockerfile');
  test('multi-stage, runtime dependencies only, a non-root user', () => {
    assert.ok((text.match(/^FROM /gm) ?? []).length >= 2, 'two stages');
    assert.match(text, /RUN npm ci --omit=dev/);
    const user = /^USER (\S+)/m.exec(text)?.[1];
    assert.ok(user && user !== 'root' && user !== '0', `USER ${user}`);
    const pkg = JSON.parse(read('package.json'));
    for (const runtime of ['tsx', 'uplot', 'prom-client', 'zeromq']) {
      assert.ok(pkg.dependencies[runtime], `${runtime} is a runtime dependency (--omit=dev)`);
    }
  });

  test("the health check and the default command use the gateway's port and /health", () => {
    // The health check follows KVROUTE_PORT, set to the default port the command listens on.
    assert.match(text, new RegExp(`^ENV KVROUTE_PORT=${DEFAULT_PORT}$`, 'm'));
    assert.match(
      text,
      new RegExp(
        `HEALTHCHECK[^\\n]*\\\\\\n[^\\n]*127\\.0\\.0\\.1:' \\+ \\(process\\.env\\.KVROUTE_PORT \\|\\| ${DEFAULT_PORT}\\) \\+ '/health`,
      ),
    );
    assert.match(text, new RegExp(`^EXPOSE .*\\b${DEFAULT_PORT}\\b`, 'm'));
    assert.match(
      text,
      new RegExp(`CMD \\["serve", "--host", "0\\.0\\.0\\.0", "--port", "${DEFAULT_PORT}"\\]`),
    );
  });
});

describe('Kubernetes manifests', () => {
  const config = configMap.data['kvroute.yaml'];
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-deploy-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("the ConfigMap's config passes kvroute serve --check-config", () => {
    const path = join(dir, 'kvroute.yaml');
    writeFileSync(path, config);
    const out = runCli(['serve', '--check-config', path]);
    assert.equal(out.status, 0, out.stderr);
    assert.match(out.stdout, /valid/);
    const broken = join(dir, 'broken.yaml');
    writeFileSync(broken, `${config}\nmax-queue-ms: soon\n`);
    assert.equal(runCli(['serve', '--check-config', broken]).status, 2, 'and a bad one fails');
  });

  test('the gateway mounts that config where its args read it, on the port it names', () => {
    const mount = gatewayContainer.volumeMounts.find((m: Doc) => m.name === 'config');
    const volume = gatewayDeployment.spec.template.spec.volumes.find(
      (v: Doc) => v.name === 'config',
    );
    assert.equal(volume.configMap.name, configMap.metadata.name);
    assert.equal(argOf(gatewayContainer, '--config'), `${mount.mountPath}/kvroute.yaml`);
    const port = /^port: (\d+)$/m.exec(config)?.[1];
    assert.equal(Number(port), portNamed(gatewayContainer, 'http'));
    assert.equal(portNamed(gatewayContainer, 'http'), DEFAULT_PORT);
    assert.match(config, /^host: 0\.0\.0\.0$/m, 'listens beyond loopback in a pod');
    // Ready once every model has a healthy backend (/ready); alive while it serves (/health).
    assert.equal(gatewayContainer.readinessProbe.httpGet.path, '/ready');
    assert.equal(gatewayContainer.livenessProbe.httpGet.path, '/health');
    for (const probe of probes(gatewayContainer)) assert.equal(probe.httpGet.port, 'http');
  });

  test('Services and ServiceMonitors point at named ports that exist', () => {
    const service = find('Service', 'kvroute');
    assert.equal(service.spec.ports[0].targetPort, 'http');
    assert.deepEqual(service.spec.selector, gatewayDeployment.spec.selector.matchLabels);
    for (const name of ['kvroute', 'kvroute-engine']) {
      const monitor = find('ServiceMonitor', name);
      const target = find('Service', name);
      for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) {
        assert.equal(target.metadata.labels[k], v, `${name}: ServiceMonitor selects its Service`);
      }
      const endpoint = monitor.spec.endpoints[0];
      assert.equal(endpoint.path, '/metrics');
      assert.ok(target.spec.ports.some((p: Doc) => p.name === endpoint.port));
    }
  });

  test("the test fleet's ports match its args, and the config's backends name its pods", () => {
    const httpPort = portNamed(engineContainer, 'http');
    assert.equal(Number(argOf(engineContainer, '--port')), httpPort);
    assert.equal(argOf(engineContainer, '--host'), '0.0.0.0');
    const eventsPort = Number(argOf(engineContainer, '--kv-events')?.split(':').pop());
    const replayPort = Number(argOf(engineContainer, '--kv-replay')?.split(':').pop());
    assert.equal(eventsPort, portNamed(engineContainer, 'kv-events'));
    assert.equal(replayPort, portNamed(engineContainer, 'kv-replay'));
    for (const probe of probes(engineContainer)) assert.equal(probe.httpGet.path, '/health');
    const service = engineSet.spec.serviceName;
    const backends = [
      ...config.matchAll(
        /url: http:\/\/([\w-]+)-(\d+)\.([\w-]+):(\d+)\n\s+events: tcp:\/\/\1-\2\.\3:(\d+)\n\s+replay: tcp:\/\/\1-\2\.\3:(\d+)/g,
      ),
    ];
    assert.equal(backends.length, engineSet.spec.replicas, 'one backend per engine pod');
    for (const [, set, index, svc, http, events, replay] of backends) {
      assert.equal(set, engineSet.metadata.name);
      assert.ok(Number(index) < engineSet.spec.replicas);
      assert.equal(svc, service);
      assert.deepEqual(
        [Number(http), Number(events), Number(replay)],
        [httpPort, eventsPort, replayPort],
      );
    }
  });
});

/**
 * Kinds every Kubernetes cluster serves without a CRD (core/v1, apps/v1, batch/v1, rbac, policy,
 * networking.k8s.io/v1): what the base kustomization may list, so it applies on a plain cluster.
 */
const BUILT_IN_KINDS = new Set([
  'ConfigMap',
  'Secret',
  'Service',
  'ServiceAccount',
  'PersistentVolumeClaim',
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'Job',
  'CronJob',
  'Role',
  'RoleBinding',
  'PodDisruptionBudget',
  'NetworkPolicy',
  'Ingress',
]);

/** A kustomization's resources, each file parsed (a directory stands for its own kustomization). */
function kustomized(dir: string): { file: string; doc: Doc }[] {
  const [k] = manifests(`${dir}/kustomization.yaml`);
  assert.equal(k.kind, 'Kustomization');
  return (k.resources as string[]).flatMap((r) =>
    r.endsWith('.yaml')
      ? manifests(`${dir}/${r}`).map((doc) => ({ file: `${dir}/${r}`, doc }))
      : kustomized(join(dir, r)),
  );
}

describe('kustomizations', () => {
  test('the base lists built-in kinds only: it applies on a cluster without the Prometheus Operator', () => {
    const base = kustomized('deploy/kubernetes');
    assert.ok(base.length >= 3);
    for (const { file, doc } of base) {
      assert.ok(BUILT_IN_KINDS.has(doc.kind), `${file}: ${doc.kind} needs a CRD`);
    }
    assert.ok(base.some(({ doc }) => doc.kind === 'Deployment' && doc.metadata.name === 'kvroute'));
  });

  test('the monitoring overlay is the base plus its ServiceMonitors', () => {
    const base = kustomized('deploy/kubernetes');
    const monitoring = kustomized('deploy/kubernetes/monitoring');
    const extra = monitoring.slice(base.length);
    assert.deepEqual(
      monitoring.slice(0, base.length).map(({ doc }) => `${doc.kind}/${doc.metadata.name}`),
      base.map(({ doc }) => `${doc.kind}/${doc.metadata.name}`),
    );
    assert.deepEqual(
      extra.map(({ doc }) => `${doc.kind}/${doc.metadata.name}`),
      ['ServiceMonitor/kvroute', 'ServiceMonitor/kvroute-engine'],
    );
  });
});

describe('probes and the Grafana dashboard against live servers', () => {
  let engines: EngineServerHandle[];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(1, { speedup: 50 });
    gw = await startGatewayFor(engines);
    assert.equal((await complete(gw.url, { prompt: tokens(7, 48), max_tokens: 2 })).status, 200);
  });
  after(async () => {
    await gw.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('every probe path answers 200 on the server it probes', async () => {
    for (const probe of probes(gatewayContainer)) {
      assert.equal((await fetch(`${gw.url}${probe.httpGet.path}`)).status, 200);
    }
    for (const probe of probes(engineContainer)) {
      assert.equal((await fetch(`${engines[0]!.url}${probe.httpGet.path}`)).status, 200);
    }
  });

  test('every metric the dashboard queries is exported by the gateway or the engine', async () => {
    /** Names from `# TYPE` lines; a histogram's series are NAME_bucket, _sum, _count. */
    const exported = new Set<string>();
    for (const url of [gw.url, engines[0]!.url]) {
      const text = await (await fetch(`${url}/metrics`)).text();
      for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
        exported.add(name!);
        if (type === 'histogram' || type === 'summary') {
          for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name}${suffix}`);
        }
      }
    }
    const dashboard = JSON.parse(read('deploy/grafana/kvroute.json'));
    const exprs: string[] = dashboard.panels.flatMap((p: Doc) =>
      (p.targets ?? []).map((t: Doc) => t.expr),
    );
    assert.ok(exprs.length >= 20, `${exprs.length} queries`);
    const queried = new Set(
      exprs.flatMap((e) =>
        [...e.matchAll(/\b(?:kvroute_|vllm:|process_|nodejs_)[\w:]+/g)].map((m) => m[0]),
      ),
    );
    assert.ok(queried.size >= 20);
    const missing = [...queried].filter((name) => !exported.has(name));
    assert.deepEqual(missing, [], `queried but not exported: ${missing.join(', ')}`);
    for (const needed of [
      'kvroute_gateway_ttft_seconds_bucket',
      'kvroute_gateway_e2e_seconds_bucket',
      'kvroute_gateway_pre_upstream_seconds_bucket',
      'kvroute_gateway_route_decision_seconds_bucket',
      'kvroute_gateway_requests_total',
      'vllm:kv_cache_usage_perc',
    ]) {
      assert.ok(queried.has(needed), `the dashboard shows ${needed}`);
    }
  });
});
