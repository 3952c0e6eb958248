/** The parseArgs spec a table declares: a value for every type but boolean, repeatable lists. */
import type { FlagSpec } from '../args.ts';
import { isBlock, type OptionTable } from './table.ts';

export function specOf(table: OptionTable): FlagSpec {
  const spec: FlagSpec = {};
  for (const [name, e] of Object.entries(table)) {
    if (isBlock(e)) Object.assign(spec, e.spec);
    else if (e.flag === false) continue;
    else if (e.type === 'boolean') spec[name] = { type: 'boolean' };
    else if (e.type === 'list') spec[name] = { type: 'string', multiple: true };
    else spec[name] = { type: 'string' };
  }
  return spec;
}

/** The flag names, space-separated (for a command still composing `flagSpec` strings). */
export function flagNamesOf(table: OptionTable, kind: 'value' | 'boolean' = 'value'): string {
  return Object.entries(specOf(table))
    .filter(([, f]) => (f.type === 'boolean') === (kind === 'boolean'))
    .map(([name]) => name)
    .join(' ');
}
