/**
 * A CPU profile of this tree's gateway under bench:gateway's throughput load (64 closed-loop
 * connections, two instant backends): `node --import tsx bench/gatewayProfile.ts [--seconds 10]
 * [--dir DIR] [--root TREE]`. The gateway runs under `--cpu-prof`; its profile (written to DIR, default
 * /tmp/kvroute-gateway-profile, when it stops) covers start-up too: the load's start is printed as
 * an offset from the process start, to cut it when reading the profile. Once the gateway has
 * stopped, the profile's busy time during the load is printed split by who spent it
 * (`profileShares`): kvroute's own folders, each dependency, node's internals, native calls.
 */
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { closedLoop, startChild, startInstantBackends, stopChildren } from './gatewayLoad.ts';
import { profileShares } from './profileShares.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('gatewayProfile', {
  seconds: { type: 'string' },
  dir: { type: 'string' },
  root: { type: 'string' },
});
const SECONDS = benchFlags('gatewayProfile').positiveNumber('seconds', values.seconds, 10);
const DIR = values.dir ?? '/tmp/kvroute-gateway-profile';
/** `--root DIR`: another tree's gateway (a baseline laid out as bench/gatewayAb.ts says). */
const ROOT = values.root;
/** The system's monotonic clock in µs, as a CPU profile's timestamps read it. */
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);
const BIN = ROOT
  ? `${ROOT}/bin/kvroute.js`
  : fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));

try {
  const backends = await startInstantBackends(2);
  const started = performance.now();
  const { match, child } = await startChild(
    process.execPath,
    [
      '--cpu-prof',
      '--cpu-prof-dir',
      DIR,
      BIN,
      'serve',
      '--port',
      '0',
      '--index',
      'approx',
      ...backends.flatMap((b) => ['--backend', b]),
    ],
    /listening on (\S+)/,
  );
  await closedLoop(match[1]!, 64, 2);
  const loadFromS = (performance.now() - started) / 1000;
  const fromUs = nowUs();
  const { requestsPerS, done } = await closedLoop(match[1]!, 64, SECONDS);
  const toUs = nowUs();
  process.stdout.write(
    `${JSON.stringify({ dir: DIR, pid: child.pid, loadFromS: Math.round(loadFromS * 10) / 10, requests: done, requestsPerS: Math.round(requestsPerS) })}\n`,
  );
  // The profile is written as the gateway exits; its main thread's file is <pid>.0.
  const exited = once(child, 'exit');
  stopChildren();
  await exited;
  const file = readdirSync(DIR).find((f) => f.includes(`.${child.pid}.0.`));
  if (file === undefined) throw new Error(`no profile of ${child.pid} in ${DIR}`);
  const shares = profileShares(`${DIR}/${file}`, fromUs, toUs);
  process.stdout.write(`${JSON.stringify({ profile: file, busyShares: shares })}\n`);
} finally {
  stopChildren();
}
