/**
 * The options section of a command's `--help`, from its table: `  --name ARG` in a 24-column
 * gutter, the help line wrapped at 96 columns under it, a row's section heading before it.
 */
import { helpLine, isBlock, type OptionTable } from './table.ts';

const GUTTER = 24;
const WIDTH = 96;

export function helpOf(table: OptionTable): string {
  let out = '';
  for (const [name, e] of Object.entries(table)) {
    if (isBlock(e)) {
      out += e.help;
      continue;
    }
    if (e.flag === false) continue;
    if (e.section !== undefined) out += `${e.section}\n`;
    const head = `  --${name}${e.arg === undefined ? '' : ` ${e.arg}`}`;
    out += wrap(head, helpLine(e));
  }
  return out;
}

/** `head` then `text` from the gutter (or two spaces past a long head), wrapped. */
function wrap(head: string, text: string): string {
  const lines: string[] = [];
  let line = head.length <= GUTTER - 2 ? head.padEnd(GUTTER) : `${head}  `;
  let empty = true;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (!empty && line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = ' '.repeat(GUTTER);
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    empty = false;
  }
  lines.push(line.trimEnd());
  return `${lines.join('\n')}\n`;
}
