/**
 * `--price GPU=$/h[,GPU=$/h...]`: hourly prices of one GPU over the catalog's list prices
 * (`src/model/catalog.ts`, each from a named, dated sheet). A problem is one line naming the flag.
 */
import { GPUS } from '../model/catalog.ts';
import { UsageError } from './args.ts';

/** $/h of one GPU by name: the catalog's, with `--price` over them. */
export function readPrices(value: string | undefined): Record<string, number> {
  const prices: Record<string, number> = Object.fromEntries(
    Object.values(GPUS).map((g) => [g.name, g.price.dollarsPerHour]),
  );
  if (value === undefined) return prices;
  for (const part of value.split(',')) {
    const [name, raw] = part.split('=', 2).map((s) => s.trim());
    const gpu = name?.toLowerCase() ?? '';
    if (!Object.hasOwn(GPUS, gpu)) {
      throw new UsageError(
        `--price: unknown GPU '${name ?? ''}' in '${part}'; accepted: ${Object.keys(GPUS).join(', ')} (GPU=$/h)`,
      );
    }
    const text = (raw ?? '').replace(/^\$/, '').replace(/\/h$/, '');
    const n = text === '' ? Number.NaN : Number(text);
    if (!Number.isFinite(n) || n <= 0) {
      throw new UsageError(`--price ${part}: $/h must be a positive number, e.g. ${gpu}=3.50`);
    }
    prices[gpu] = n;
  }
  return prices;
}
