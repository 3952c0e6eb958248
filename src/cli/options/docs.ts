/**
 * docs/configuration.md's tables from a command's option table: its flags (the `--help` lines,
 * as markdown) and, for a command with a config file, its keys. The doc holds each between
 * `<!-- options:NAME -->` and `<!-- /options:NAME -->`; `replaceGenerated` rewrites those spans
 * (`npx tsx src/cli/options/writeDocs.ts`) and test/docs/docs.reference.test.ts checks them.
 */
import { helpLine, isBlock, type OptionTable } from './table.ts';

/**
 * The flags' table: `| \`--name ARG\` | unit | help (default X) |`, a block's flags read from
 * its help text.
 */
export function flagsDocOf(table: OptionTable): string {
  const rows = ['| flag | unit | meaning |', '| --- | --- | --- |'];
  for (const [name, e] of Object.entries(table)) {
    if (isBlock(e)) {
      for (const [head, text] of blockRows(e.help)) {
        const flag = head.split(' ')[0]!.slice(2);
        const unit = unitOfName(flag) ?? '';
        rows.push(`| \`${head}\` | ${unit} | ${markdown(text)}${e.docs?.[flag] ?? ''} |`);
      }
      continue;
    }
    if (e.flag === false) continue;
    // A pipe in the head (an enum's values as its placeholder) is escaped, as in a cell.
    const head = `--${name}${e.arg === undefined ? '' : ` ${e.arg}`}`.replaceAll('|', '\\|');
    const unit = e.unit ?? (e.type === 'int' || e.type === 'number' ? unitOfName(name) : '') ?? '';
    rows.push(`| \`${head}\` | ${unit} | ${markdown(helpLine(e))}${e.docs ?? ''} |`);
  }
  return rows.join('\n');
}

/** The config keys' table: `| \`key\` | what |`, a flag's key pointing at its flag. */
export function configDocOf(table: OptionTable): string {
  const rows = ['| key | what |', '| --- | --- |'];
  for (const [name, e] of Object.entries(table)) {
    if (isBlock(e) || e.config === undefined) continue;
    const what = e.configDocs ?? `\`--${name}\``;
    rows.push(`| \`${e.config}\` | ${what} |`);
  }
  return rows.join('\n');
}

/** The unit a name ends in (`-ms`, `-s`, `-bytes`, `-tokens`), as the style names them. */
function unitOfName(name: string): string | undefined {
  return /-(ms|s|bytes|tokens)$/.exec(name)?.[1];
}

/** A flag and its placeholder in a help block: `--name`, `--name N`, `--url URL[,URL...]`. */
const HEAD = String.raw`--\S+(?: [A-Z]\S*)?`;

/**
 * `[head, text]` of each `  --flag ARG  text` line of a help block, continuations joined. A
 * line of heads alone (`  --a N  --b N`) shares the text of the line after it.
 */
export function blockRows(help: string): [string, string][] {
  const rows: [string, string][] = [];
  for (const line of help.split('\n')) {
    const start = new RegExp(`^ {2}(${HEAD})\\s+(.*)$`).exec(line);
    if (start) {
      const text = start[2]!.trim();
      if (new RegExp(`^(?:${HEAD}\\s*)+$`).test(text)) {
        for (const head of [start[1]!, ...text.split(/\s{2,}/)]) rows.push([head, '']);
      } else rows.push([start[1]!, text]);
    } else if (/^ {4,}\S/.test(line) && rows.length > 0) {
      const last = rows[rows.length - 1]!;
      last[1] = `${last[1]} ${line.trim()}`;
    }
  }
  for (let i = rows.length - 2; i >= 0; i--) if (rows[i]![1] === '') rows[i]![1] = rows[i + 1]![1];
  return rows;
}

/** Help text as table-cell markdown: pipes, emphasis marks and angle brackets escaped. */
function markdown(text: string): string {
  return text
    .replaceAll('|', '\\|')
    .replaceAll('_', '\\_')
    .replaceAll('*', '\\*')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;');
}

const open = (name: string) => `<!-- options:${name} -->`;
const close = (name: string) => `<!-- /options:${name} -->`;

/** The text between a span's markers; null when the doc has no such span. */
export function generatedSpan(doc: string, name: string): string | null {
  const start = doc.indexOf(open(name));
  const end = doc.indexOf(close(name));
  if (start < 0 || end < start) return null;
  return doc
    .slice(start + open(name).length, end)
    .replace(/^\n/, '')
    .replace(/\n$/, '');
}

/** The doc with a span's text replaced; throws when the doc lacks its markers. */
export function replaceGenerated(doc: string, name: string, text: string): string {
  const start = doc.indexOf(open(name));
  const end = doc.indexOf(close(name));
  if (start < 0 || end < start) throw new Error(`no ${open(name)} ... ${close(name)} span`);
  return `${doc.slice(0, start)}${open(name)}\n${text}\n${doc.slice(end)}`;
}
