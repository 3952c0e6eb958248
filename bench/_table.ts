import { computeBlockKeys } from '../src/kv/blockKey.ts';
import { BlockKeyTable } from '../src/kv/blockKeyTable.ts';
import { FreeBlockQueue } from '../src/kv/freeBlockQueue.ts';
const t = new BlockKeyTable(2004);
const keys = Array.from({ length: 400 }, (_, s) => computeBlockKeys(Array.from({ length: 8000 }, (_, i) => ((1000 + s) * 7919 + i * 31) % 128_000), 16));
const ins: number[] = [], del: number[] = [], tch: number[] = [], fq: number[] = [];
const q = new FreeBlockQueue(2004);
for (let b = 0; b < 2004; b++) q.pushBack(b);
for (let r = 0; r < 4000; r++) {
  const k = keys[r % 400]!;
  let a = performance.now();
  for (let i = 0; i < 500; i++) t.addIfAbsent(k[i]!, i);
  let b = performance.now(); ins.push((b - a) * 1000);
  a = performance.now();
  t.touch(k, 0, 500);
  b = performance.now(); tch.push((b - a) * 1000);
  a = performance.now();
  for (let i = 0; i < 500; i++) t.delete(k[i]!);
  b = performance.now(); del.push((b - a) * 1000);
  a = performance.now();
  const out: number[] = [];
  q.takeFront(500, out);
  for (let i = 0; i < 500; i++) q.pushBack(out[i]!);
  b = performance.now(); fq.push((b - a) * 1000);
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log('insert', med(ins).toFixed(2), 'touch', med(tch).toFixed(2), 'delete', med(del).toFixed(2), 'freeq take+push', med(fq).toFixed(2));
