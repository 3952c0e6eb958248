import { computeBlockKeys } from '../src/kv/blockKey.ts';
import { BlockPool, T } from './_bp.ts';
const pool = new BlockPool({ numBlocks: 4 * 501, blockSize: 16 });
const prompts = Array.from({ length: 400 }, (_, s) => Array.from({ length: 8000 }, (_, i) => ((1000 + s) * 7919 + i * 31) % 128_000));
const keys = prompts.map((p) => computeBlockKeys(p, 16));
const parts = ['find', 'alloc', 'store', 'take', 'release'];
const t: Record<string, number[]> = Object.fromEntries(parts.map((p) => [p, []]));
for (let r = 0; r < 4000; r++) {
  const kk = keys[r % 400]!, p = prompts[r % 400]!;
  const s: number[] = [performance.now()];
  const hit = pool.findCachedPrefix(kk, 499);
  s.push(performance.now());
  const ids: number[] = [];
  pool.tryAllocate(500, ids);
  s.push(performance.now());
  pool.cacheFullBlocks(ids, kk, 0, 500, p, {});
  s.push(performance.now());
  pool.takeEvents();
  s.push(performance.now());
  pool.release(ids);
  s.push(performance.now());
  if (r > 1000) parts.forEach((name, i) => t[name]!.push((s[i + 1]! - s[i]!) * 1000));
  if (hit.blockIds.length > 0) throw new Error('hit');
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log(Object.fromEntries(parts.map((k) => [k, med(t[k]!).toFixed(2)])));

console.log(Object.fromEntries(Object.entries(T).map(([k, v]) => [k, (med(v.slice(1000)) * 1000).toFixed(2)])));
