/**
 * The README and docs/ read as a test reads them: guides, their fenced code blocks, the
 * commands in them (continuation lines joined, comments cut), links, and the flags a
 * `kvroute COMMAND --help` names.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './cli.ts';

export const DOCS = join(ROOT, 'docs');

export interface CodeBlock {
  lang: string;
  text: string;
  /** 1-based line of the opening fence. */
  line: number;
}

export interface Doc {
  /** Relative to the checkout: README.md, docs/routing.md... */
  path: string;
  text: string;
  blocks: CodeBlock[];
}

export function readDoc(path: string): Doc {
  const text = readFileSync(join(ROOT, path), 'utf8');
  return { path, text, blocks: codeBlocks(text) };
}

/** docs/*.md but the index, by name. */
export function guidePaths(): string[] {
  return readdirSync(DOCS)
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .sort()
    .map((f) => `docs/${f}`);
}

/** The project README, the index and every guide. */
export function allDocs(): Doc[] {
  return ['README.md', 'docs/README.md', ...guidePaths()].map(readDoc);
}

export function codeBlocks(text: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i]!.startsWith('```'); i++) body.push(lines[i]!);
    blocks.push({ lang: open[1]!, text: body.join('\n'), line: start + 1 });
  }
  return blocks;
}

/** Shell blocks' commands: `\` continuations joined, `  # comments` cut, blank lines dropped. */
export function commands(block: CodeBlock): string[] {
  const joined = block.text.replace(/\\\n\s*/g, ' ');
  return joined
    .split('\n')
    .map((line) =>
      line
        .replace(/\s{2,}#.*$/, '')
        .replace(/^#.*$/, '')
        .trim(),
    )
    .filter((line) => line.length > 0);
}

/** Every `--flag` a text names (dotted forms such as --kv-transfer-config.kv_role kept whole). */
export function flagsIn(text: string): Set<string> {
  return new Set(text.match(/(?<![\w-])--[a-z][a-z0-9_]*(?:[-.][a-z0-9_]+)*/g) ?? []);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

export function anchors(text: string): Set<string> {
  const out = new Set<string>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (m) out.add(anchorOf(m[1]!));
  }
  return out;
}

/** Markdown links `[text](target)` outside code blocks. */
export function links(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) out.push(m[1]!);
  }
  return out;
}
