/**
 * The config file's keys a table declares (rows with `config`), and the check of a parsed
 * document's top-level keys against them: an unknown key is an error naming the accepted ones.
 */
import { isBlock, type OptionTable } from './table.ts';

export function configKeysOf(table: OptionTable): string[] {
  return Object.values(table).flatMap((e) =>
    isBlock(e) || e.config === undefined ? [] : [e.config],
  );
}

/** The first key of `doc` the table does not declare, with the accepted keys; null: none. */
export function unknownKey(
  doc: Record<string, unknown>,
  known: ReadonlySet<string>,
): { key: string; accepted: string } | null {
  const key = Object.keys(doc).find((k) => !known.has(k));
  return key === undefined ? null : { key, accepted: [...known].join(', ') };
}
