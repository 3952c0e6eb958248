/**
 * A worker thread of `workerPool.ts`: runs one simulation per message, from a plain `SimConfig`,
 * and posts the plain result back, and on the way its progress (the fraction of simulated time
 * done, each time it moves by a percent). A task is cancelled when the pool writes its id into
 * this worker's slot of the shared cancel array; the run notices at its next progress check.
 * A message with `pdSearch` runs a whole P/D split search (`pd/runPd.ts`) instead, reporting
 * each probe; it is not cancelled (the fleet search needs every one it starts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { expectedPdProbes, PdSearcher } from './pd/runPd.ts';
import { simulate } from './run.ts';
import type { TaskMessage, WorkerReply } from './workerPool.ts';

const { cancel, slot } = workerData as { cancel: Int32Array; slot: number };

class Cancelled extends Error {}

parentPort!.on('message', (task: TaskMessage) => {
  let reply: WorkerReply;
  let percent = 0;
  try {
    if (task.pdSearch !== undefined) {
      const { slo, ...o } = task.pdSearch;
      const expected = expectedPdProbes(o);
      const searcher = new PdSearcher(task.config, {
        ...o,
        onProbe: (probes, split) =>
          parentPort!.postMessage({
            id: task.id,
            kind: 'progress',
            fraction: Math.min(0.99, (probes - 1) / expected),
            detail: `P:D ${split}`,
          } satisfies WorkerReply),
      });
      const found = searcher.searchDisaggregated(slo);
      parentPort!.postMessage({
        id: task.id,
        kind: 'pd-done',
        pd: { ...found, probes: searcher.probes },
      } satisfies WorkerReply);
      return;
    }
    const result = simulate({
      ...task.config,
      onProgress: (fraction) => {
        if (Atomics.load(cancel, slot) === task.id) throw new Cancelled();
        const now = Math.floor(fraction * 100);
        if (now > percent) {
          percent = now;
          parentPort!.postMessage({
            id: task.id,
            kind: 'progress',
            fraction,
          } satisfies WorkerReply);
        }
      },
    });
    reply = { id: task.id, kind: 'done', result };
  } catch (err) {
    reply =
      err instanceof Cancelled
        ? { id: task.id, kind: 'cancelled' }
        : {
            id: task.id,
            kind: 'error',
            message: err instanceof Error ? err.message : String(err),
            code: (err as { code?: unknown }).code,
          };
  }
  parentPort!.postMessage(reply);
});
