import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Seq } from '../../src/scheduler/seq.ts';
import { WaitQueue } from '../../src/scheduler/waitQueue.ts';

const seq = (n: number, arrivalMs = n): Seq =>
  new Seq({ id: `q${n}`, promptTokens: 8, maxNewTokens: 1, arrivalMs }, n, 10_000);

test('wait queue: arrival order, preempted requests at the front, removal from the middle', () => {
  const q = new WaitQueue();
  const [a, b, c, d] = [seq(0), seq(1), seq(2), seq(3, 1.5)];
  q.insert(a);
  q.insert(c);
  q.insert(b);
  q.insert(d); // arrived between b and c
  assert.deepEqual(
    q.toArray().map((s) => s.id),
    ['q0', 'q1', 'q3', 'q2'],
  );
  assert.equal(q.shift(), a);
  q.insert(a); // preempted: back at the front
  assert.equal(q.peek(), a);
  assert.equal(q.remove(d), true);
  assert.equal(q.remove(d), false);
  assert.deepEqual(
    q.toArray().map((s) => s.id),
    ['q0', 'q1', 'q2'],
  );
  assert.equal(q.size, 3);
});

test('wait queue: a request taken off the queue is not kept alive by it', async () => {
  // A queue that held on to popped requests kept every admitted prompt alive (hundreds of MB in
  // a long simulation): once shifted, a request must be collectable.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const q = new WaitQueue();
  const refs: WeakRef<Seq>[] = [];
  for (let i = 0; i < 100; i++) {
    const s = seq(i);
    refs.push(new WeakRef(s));
    q.insert(s);
  }
  for (let i = 0; i < 60; i++) q.shift();
  // A WeakRef keeps its target alive until the current job ends.
  await new Promise((resolve) => setImmediate(resolve));
  gc();
  const alive = refs.map((r) => r.deref() !== undefined);
  assert.deepEqual(alive.slice(0, 60), new Array(60).fill(false));
  assert.deepEqual(alive.slice(60), new Array(40).fill(true));
  assert.equal(q.size, 40);
});
