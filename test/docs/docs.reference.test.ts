/**
 * The README and docs/ against the code: the README is a short front door (at most 200 lines,
 * the set-up commands true to package.json), every guide starts with what it is for and a
 * command, every link and anchor resolves, every `kvroute COMMAND --flag` in a code block is a
 * flag that command's `--help` names, and the configuration reference lists exactly each
 * command's flags and the config file's keys. (The guides' first commands run in
 * test/docs/docs.commands.*.test.ts.)
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { BENCH_OPTIONS } from '../../src/cli/options/bench.ts';
import { CALIBRATE_OPTIONS } from '../../src/cli/options/calibrate.ts';
import { PLAN_OPTIONS } from '../../src/cli/options/plan.ts';
import { DEMO_OPTIONS } from '../../src/cli/options/demo.ts';
import { generatedSpan } from '../../src/cli/options/docs.ts';
import { ENGINE_SERVER_OPTIONS } from '../../src/cli/options/engine.ts';
import { EPP_OPTIONS } from '../../src/cli/options/epp.ts';
import { SERVE_OPTIONS } from '../../src/cli/options/serve.ts';
import { SIM_OPTIONS } from '../../src/cli/options/sim.ts';
import { DOC_SPANS } from '../../src/cli/options/spans.ts';
import { specOf } from '../../src/cli/options/spec.ts';
import type { OptionTable } from '../../src/cli/options/table.ts';
import { KNOWN_KEYS } from '../../src/serving/config.ts';
import { ROOT, runCli } from '../support/cli.ts';
import {
  allDocs,
  anchors,
  commands,
  flagsIn,
  guidePaths,
  links,
  readDoc,
} from '../support/docs.ts';

const COMMANDS = ['serve', 'engine', 'sim', 'plan', 'epp', 'bench', 'calibrate', 'model', 'demo'];
/** The commands declared as an option table: their docs tables are generated from it. */
const TABLES: Record<string, OptionTable> = {
  serve: SERVE_OPTIONS,
  engine: ENGINE_SERVER_OPTIONS,
  epp: EPP_OPTIONS,
  bench: BENCH_OPTIONS,
  sim: SIM_OPTIONS,
  calibrate: CALIBRATE_OPTIONS,
  plan: PLAN_OPTIONS,
  demo: DEMO_OPTIONS,
};
const SHELL = new Set(['sh', 'bash', '']);

const helpCache = new Map<string, string>();
/** `kvroute COMMAND --help` (COMMAND may carry a mode flag: `plan --search-fleet`), once each. */
function help(command: string): string {
  let text = helpCache.get(command);
  if (text === undefined) {
    const r = runCli([...command.split(' '), '--help'], 120_000);
    assert.equal(r.status, 0, `kvroute ${command} --help: ${r.stderr}`);
    text = r.stdout;
    helpCache.set(command, text);
  }
  return text;
}

describe('the README', () => {
  const readme = readDoc('README.md');
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

  test('is at most 200 lines, with a Mermaid picture and the two set-up commands', () => {
    const lines = readme.text.split('\n').length - (readme.text.endsWith('\n') ? 1 : 0);
    assert.ok(lines <= 200, `README.md has ${lines} lines`);
    assert.ok(readme.blocks.some((b) => b.lang === 'mermaid'));
    const setup = readme.blocks.find((b) => b.text.includes('npm ci'));
    assert.ok(setup);
    assert.deepEqual(commands(setup), ['npm ci && npm start', 'npm test']);
    assert.match(pkg.scripts.start, /bin\/kvroute\.js serve$/);
    assert.match(pkg.scripts.test, /--test .*test\/\*\/\*\.test\.ts/);
  });

  test('its command table points every guide, and the index lists every guide', () => {
    const index = readDoc('docs/README.md');
    for (const guide of guidePaths()) {
      const name = guide.slice('docs/'.length);
      assert.ok(readme.text.includes(`](${guide})`), `README links ${guide}`);
      assert.ok(index.text.includes(`](${name})`), `docs/README.md links ${name}`);
    }
  });

  test('its example script is the one the tour shows', () => {
    const script = readFileSync(join(ROOT, 'docs/examples/openai-chat.mjs'), 'utf8');
    assert.ok(
      readme.blocks.some((b) => b.lang === 'js' && `${b.text}\n` === script),
      'the js block of the tour is docs/examples/openai-chat.mjs',
    );
  });
});

test('every guide starts with a title, what it is for, then a command', () => {
  for (const path of guidePaths()) {
    const { text, blocks } = readDoc(path);
    const lines = text.split('\n');
    assert.match(lines[0]!, /^# \S/, `${path}: a title`);
    const first = blocks[0];
    assert.ok(first && SHELL.has(first.lang) && first.line <= 20, `${path}: a command block first`);
    const lead = lines.slice(1, first.line - 1).join(' ');
    assert.match(lead, /What it is for: \S/, `${path}: says what it is for before its command`);
    assert.ok(commands(first).length > 0, path);
  }
});

test('every link and anchor in the README and docs/ resolves', () => {
  for (const doc of allDocs()) {
    for (const target of links(doc.text)) {
      if (/^[a-z]+:/.test(target)) continue; // http(s), mailto
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const resolved = file === '' ? doc.path : normalize(join(dirname(doc.path), file));
      assert.ok(existsSync(join(ROOT, resolved)), `${doc.path}: ${target} -> ${resolved}`);
      if (anchor !== undefined && resolved.endsWith('.md')) {
        const heads = anchors(readFileSync(join(ROOT, resolved), 'utf8'));
        assert.ok(heads.has(anchor), `${doc.path}: #${anchor} in ${resolved}`);
      }
    }
  }
});

test('every kvroute command line in a code block uses flags its --help names', () => {
  const scripts = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts;
  let checked = 0;
  for (const doc of allDocs()) {
    for (const block of doc.blocks.filter((b) => SHELL.has(b.lang))) {
      for (const line of commands(block)) {
        for (const part of line.split(/&&|;|\|(?!\|)/)) {
          const run = /(?:^|\s)npm run (\S+)/.exec(part);
          if (run) assert.ok(scripts[run[1]!], `${doc.path}: npm run ${run[1]} is a script`);
          const m =
            /(?:^|\s)(?:npx )?kvroute (\w+)(.*)$/.exec(part) ??
            /(?:^|\s)npm run (demo) --(.*)$/.exec(part) ??
            /(?:^|\s)npm (start) --(.*)$/.exec(part);
          if (!m) continue;
          const command = m[1] === 'start' ? 'serve' : m[1]!;
          assert.ok(COMMANDS.includes(command), `${doc.path}: kvroute ${command} is a command`);
          // The fleet search is a mode of `kvroute plan` with flags of its own.
          const mode =
            command === 'plan' && /--search-fleet\b/.test(m[2]!) ? 'plan --search-fleet' : command;
          const known = flagsIn(help(mode));
          for (const flag of flagsIn(m[2]!.replace(/'[^']*'/g, ''))) {
            const base = flag.split('.')[0]!;
            assert.ok(
              known.has(flag) || known.has(base) || flag === '--help',
              `${doc.path}:${block.line}: kvroute ${command} ${flag} is not in its --help`,
            );
          }
          checked++;
        }
      }
    }
  }
  assert.ok(checked >= 40, `${checked} command lines checked`);
});

describe('docs/configuration.md', () => {
  const text = readDoc('docs/configuration.md').text;
  /** The flags of the table under `## \`kvroute COMMAND\`` (or `npm run demo --`). */
  const table = (heading: string): Set<string> => {
    const start = text.indexOf(`\n## \`${heading}\``);
    assert.ok(start >= 0, `a section for ${heading}`);
    const end = text.indexOf('\n## ', start + 1);
    const section = text.slice(start, end < 0 ? undefined : end);
    return new Set([...section.matchAll(/^\| `(--[^ `]+)/gm)].map((m) => m[1]!));
  };

  test("each command's table lists exactly the flags its --help names", () => {
    for (const command of COMMANDS) {
      const listed = table(command === 'demo' ? 'npm run demo --' : `kvroute ${command}`);
      // An option table's --help names other commands' flags in its prose (kvroute engine
      // --advertise); its own flags are the table's.
      const own = TABLES[command];
      const named = own
        ? new Set(Object.keys(specOf(own)).map((f) => `--${f}`))
        : flagsIn(help(command));
      if (own) for (const flag of named) assert.ok(flagsIn(help(command)).has(flag), flag);
      const missing = [...named].filter((f) => !listed.has(f));
      const extra = [...listed].filter((f) => !named.has(f));
      assert.deepEqual({ missing, extra }, { missing: [], extra: [] }, `kvroute ${command}`);
    }
  });

  test('the tables generated from option tables are current (src/cli/options/writeDocs.ts)', () => {
    for (const [name, generate] of Object.entries(DOC_SPANS)) {
      const span = generatedSpan(text, name);
      assert.ok(span !== null, `docs/configuration.md has <!-- options:${name} -->`);
      assert.equal(span, generate(), `${name}: run npx tsx src/cli/options/writeDocs.ts`);
    }
  });

  test("the config keys' table lists exactly the keys a config file may hold", () => {
    const start = text.indexOf('| key | what |');
    const rows = text.slice(start, text.indexOf('\n\n', start));
    const listed = [...rows.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map((m) => m[1]!);
    assert.deepEqual([...listed].sort(), [...KNOWN_KEYS].sort());
    const example = parse(readFileSync(join(ROOT, 'kvroute.example.yaml'), 'utf8'));
    for (const key of Object.keys(example)) assert.ok(KNOWN_KEYS.has(key), key);
  });
});
