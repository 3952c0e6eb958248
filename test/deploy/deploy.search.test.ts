/**
 * `deploy/kubernetes/search-job.yaml` against the CLI, as `deploy.test.ts` checks the other
 * manifests: the Indexed Job's completions, its `--shard $(JOB_COMPLETION_INDEX)/N`, the index's
 * source, the shared volume and the merge's list of parts all agree; then the shards' own args
 * run (with the index substituted as Kubernetes does, and the workload shortened so the test is
 * quick) and the merge's args print exactly what the unsharded search prints.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { ROOT, runCli } from '../support/cli.ts';

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML, checked field by field
type Doc = any;

const PATH = 'deploy/kubernetes/search-job.yaml';
const docs: Doc[] = parseAllDocuments(readFileSync(join(ROOT, PATH), 'utf8')).map((d) => {
  assert.equal(d.errors.length, 0, `${PATH}: ${d.errors.join('; ')}`);
  return d.toJS();
});
const find = (kind: string, name: string): Doc => {
  const doc = docs.find((d) => d.kind === kind && d.metadata.name === name);
  assert.ok(doc, `${kind} ${name}`);
  return doc;
};
const shardJob = find('Job', 'kvroute-search');
const mergeJob = find('Job', 'kvroute-search-merge');
const claim = find('PersistentVolumeClaim', 'kvroute-search');
const shardPod = shardJob.spec.template.spec;
const mergePod = mergeJob.spec.template.spec;
const shardArgs: string[] = shardPod.containers[0].args;
const mergeArgs: string[] = mergePod.containers[0].args;
const argOf = (args: string[], flag: string): string | undefined => {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
};
const mountOf = (pod: Doc, container: Doc): string => {
  const volume = pod.volumes.find(
    (v: Doc) => v.persistentVolumeClaim?.claimName === claim.metadata.name,
  );
  assert.ok(volume, 'the pod mounts the shared claim');
  return container.volumeMounts.find((m: Doc) => m.name === volume.name).mountPath;
};

const n: number = shardJob.spec.completions;

describe(PATH, () => {
  test('an Indexed Job of N completions, each pod running shard $(JOB_COMPLETION_INDEX)/N', () => {
    assert.equal(shardJob.spec.completionMode, 'Indexed');
    assert.ok(Number.isInteger(n) && n >= 2, `completions ${n}`);
    assert.equal(shardPod.restartPolicy, 'Never');
    assert.equal(shardArgs[0], 'plan');
    assert.ok(shardArgs.includes('--search-fleet'));
    assert.equal(argOf(shardArgs, '--shard'), `$(JOB_COMPLETION_INDEX)/${n}`);
    const env = shardPod.containers[0].env.find((e: Doc) => e.name === 'JOB_COMPLETION_INDEX');
    assert.equal(
      env.valueFrom.fieldRef.fieldPath,
      "metadata.annotations['batch.kubernetes.io/job-completion-index']",
    );
  });

  test('shards write into the shared volume; the merge reads exactly their N parts', () => {
    assert.deepEqual(claim.spec.accessModes, ['ReadWriteMany']);
    const shardDir = mountOf(shardPod, shardPod.containers[0]);
    const out = argOf(shardArgs, '--out')!;
    assert.equal(out, `${shardDir}/shard-$(JOB_COMPLETION_INDEX).json`);
    const mergeDir = mountOf(mergePod, mergePod.containers[0]);
    const parts = Array.from({ length: n }, (_, i) => `${mergeDir}/shard-${i}.json`);
    assert.deepEqual(mergeArgs, ['plan', '--merge-shards', parts.join(',')]);
    // The merge waits for every part before it starts.
    const wait = mergePod.initContainers[0].args.join(' ');
    for (const p of parts) assert.ok(wait.includes(`-s ${p}`), `waits for ${p}`);
  });

  describe('the args against the CLI', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-search-job-'));
    after(() => rmSync(dir, { recursive: true, force: true }));
    /** A pod's args as the kubelet runs them here: the index expanded, the volume in `dir`. */
    const podArgs = (args: string[], index?: number): string[] =>
      args.map((a) =>
        a.replaceAll('$(JOB_COMPLETION_INDEX)', String(index)).replaceAll('/results/', `${dir}/`),
      );
    // A short, slow workload keeps the test quick; the grid, SLO and sharding are the manifest's.
    const quick = [
      '--duration',
      '6',
      '--warmup',
      '1',
      '--rate',
      '2',
      '--max-replicas',
      '4',
      '--threads',
      '1',
    ];

    test('N shards, then the merge, print what the unsharded search prints', () => {
      for (let i = 0; i < n; i++) {
        const r = runCli([...podArgs(shardArgs, i), ...quick], 240_000);
        assert.equal(r.status, 0, r.stderr);
        assert.equal(r.stdout, '', 'a shard writes its part to --out, not stdout');
      }
      const merged = runCli(podArgs(mergeArgs), 60_000);
      assert.equal(merged.status, 0, merged.stderr);
      const at = shardArgs.indexOf('--shard');
      const unsharded = shardArgs.filter((_, i) => i < at || i > at + 3);
      assert.ok(!unsharded.includes('--shard') && !unsharded.includes('--out'));
      const whole = runCli([...unsharded, ...quick], 240_000);
      assert.equal(whole.status, 0, whole.stderr);
      assert.match(whole.stdout, /^Cheapest fleet: seed workload/);
      assert.equal(merged.stdout, whole.stdout);
    });
  });
});
