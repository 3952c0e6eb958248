/**
 * src/cli/options/: one table gives the flag spec, the --help section, typed reading with
 * errors naming the flag, the config file's key check and values, and the docs tables.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { Flags, parseFlags, UsageError } from '../../src/cli/args.ts';
import { configKeysOf, unknownKey } from '../../src/cli/options/configKeys.ts';
import { configReaderOf } from '../../src/cli/options/configValue.ts';
import {
  blockRows,
  configDocOf,
  flagsDocOf,
  replaceGenerated,
} from '../../src/cli/options/docs.ts';
import { generatedSpan } from '../../src/cli/options/docs.ts';
import { helpOf } from '../../src/cli/options/help.ts';
import { readerOf } from '../../src/cli/options/read.ts';
import { SERVE_CONFIG_KEYS, SERVE_OPTIONS } from '../../src/cli/options/serve.ts';
import { flagNamesOf, specOf } from '../../src/cli/options/spec.ts';
import {
  block,
  bool,
  configOnly,
  int,
  list,
  num,
  oneOf,
  options,
  str,
} from '../../src/cli/options/table.ts';
import { flagSpec } from '../../src/cli/args.ts';
import { flagsIn } from '../support/docs.ts';

const TABLE = options({
  port: int('N', 'listen port', { min: 0, max: 65535, default: 8080, config: 'port' }),
  ratio: num('F', 'a share', { above: 0, max: 1, default: 0.5, config: 'ratio' }),
  mode: oneOf(['fast', 'slow'] as const, 'M', '{values} (default {default}; fast skips)', {
    default: 'fast',
    config: 'mode',
  }),
  name: str('NAME', 'who', { nonEmpty: true, section: 'identity', config: 'name' }),
  verbose: bool('say more', { config: 'verbose' }),
  tag: list('T', 'a tag, repeatable'),
  tenants: configOnly('tenants', 'per tenant: its limits'),
  extra: block(
    flagSpec({ string: 'extra-ms', boolean: 'extra-on' }),
    '  --extra-on            on\n  --extra-ms N          how long\n                        in ms\n',
  ),
});

const flagsOf = (argv: string[]) => new Flags(parseFlags(argv, specOf(TABLE)));

describe('an option table', () => {
  test('gives the parse spec: values, repeatable lists, booleans, blocks; no config-only keys', () => {
    assert.deepEqual(specOf(TABLE), {
      port: { type: 'string' },
      ratio: { type: 'string' },
      mode: { type: 'string' },
      name: { type: 'string' },
      verbose: { type: 'boolean' },
      tag: { type: 'string', multiple: true },
      'extra-ms': { type: 'string' },
      'extra-on': { type: 'boolean' },
    });
    assert.equal(flagNamesOf(TABLE), 'port ratio mode name tag extra-ms');
    assert.equal(flagNamesOf(TABLE, 'boolean'), 'verbose extra-on');
  });

  test('gives the --help section: every flag once, defaults, values, sections, blocks', () => {
    const help = helpOf(TABLE);
    assert.match(help, /^ {2}--port N {14}listen port \(default 8080\)$/m);
    assert.match(help, /--mode M +fast, slow \(default fast; fast skips\)/);
    assert.match(help, /^identity\n {2}--name NAME/m);
    assert.match(help, /--extra-ms N +how long\n +in ms\n$/);
    assert.deepEqual(
      [...flagsIn(help)].sort(),
      Object.keys(specOf(TABLE))
        .map((f) => `--${f}`)
        .sort(),
    );
  });

  test('wraps long help at 96 columns under a 24-column gutter', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[a-z]{1,12}$/), { maxLength: 60 }), (words) => {
        const help = helpOf(options({ flag: str('X', words.join(' ')) }));
        const lines = help.trimEnd().split('\n');
        for (const line of lines) assert.ok(line.length <= 96, line);
        for (const line of lines.slice(1)) assert.match(line, /^ {24}\S/);
        const text = lines
          .map((l, i) => (i === 0 ? l.slice(24) : l).trim())
          .join(' ')
          .trim();
        assert.equal(text, words.join(' '));
      }),
    );
  });

  test('reads each row to its type; absent flags read undefined', () => {
    const option = readerOf(TABLE, flagsOf(['--port', '0', '--ratio', '1', '--mode', 'slow']));
    assert.equal(option('port'), 0);
    assert.equal(option('ratio'), 1);
    assert.equal(option('mode'), 'slow');
    assert.equal(option('name'), undefined);
    assert.equal(option('verbose'), undefined);
    assert.equal(option('tag'), undefined);
    const more = readerOf(TABLE, flagsOf(['--verbose', '--tag', 'a', '--tag', 'b']));
    assert.equal(more('verbose'), true);
    assert.deepEqual(more('tag'), ['a', 'b']);
  });

  test('a bad value is a usage error naming the flag and what it accepts', () => {
    const bad: [string[], 'port' | 'ratio' | 'mode' | 'name', RegExp][] = [
      [['--port', '70000'], 'port', /^--port must be at most 65535, got 70000$/],
      [['--port', '1.5'], 'port', /^--port must be an integer, got '1.5'$/],
      [['--port', '-1'], 'port', /^--port must be at least 0, got -1$/],
      [['--ratio', '0'], 'ratio', /^--ratio must be greater than 0, got 0$/],
      [['--ratio', 'x'], 'ratio', /^--ratio must be a number, got 'x'$/],
      [['--mode', 'warp'], 'mode', /^--mode must be one of fast, slow; got 'warp'$/],
      [['--name', ''], 'name', /^--name must not be empty$/],
    ];
    for (const [argv, name, message] of bad) {
      const option = readerOf(TABLE, flagsOf(argv));
      assert.throws(
        () => option(name),
        (err: unknown) => err instanceof UsageError && message.test(err.message),
        argv.join(' '),
      );
    }
  });

  test('declares the config keys; an unknown one is named with the accepted keys', () => {
    assert.deepEqual(configKeysOf(TABLE), ['port', 'ratio', 'mode', 'name', 'verbose', 'tenants']);
    const known = new Set(configKeysOf(TABLE));
    assert.equal(unknownKey({ port: 1, tenants: {} }, known), null);
    assert.deepEqual(unknownKey({ port: 1, colour: 'blue' }, known), {
      key: 'colour',
      accepted: 'port, ratio, mode, name, verbose, tenants',
    });
  });

  test('reads config values with the same bounds as the flags', () => {
    const value = configReaderOf(TABLE, { port: 9000, ratio: 0.25, mode: 'slow', verbose: true });
    assert.equal(value('port'), 9000);
    assert.equal(value('ratio'), 0.25);
    assert.equal(value('mode'), 'slow');
    assert.equal(value('verbose'), true);
    assert.equal(value('name'), undefined);
    const bad: [Record<string, unknown>, 'port' | 'ratio' | 'mode' | 'name' | 'verbose', RegExp][] =
      [
        [{ port: 70000 }, 'port', /config: port must be within \[0, 65535\]/],
        [{ port: 1.5 }, 'port', /config: port must be an integer/],
        [{ ratio: 0 }, 'ratio', /config: ratio must be within/],
        [{ mode: 'warp' }, 'mode', /config: mode must be one of fast, slow/],
        [{ name: '' }, 'name', /config: name must not be empty/],
        [{ verbose: 'yes' }, 'verbose', /config: verbose must be true or false/],
      ];
    for (const [doc, name, message] of bad) {
      assert.throws(() => configReaderOf(TABLE, doc)(name), message, JSON.stringify(doc));
    }
  });

  test('gives the docs tables, a block read from its help', () => {
    const flags = flagsDocOf(TABLE).split('\n');
    assert.equal(flags[0], '| flag | unit | meaning |');
    assert.ok(flags.includes('| `--port N` |  | listen port (default 8080) |'));
    assert.ok(flags.includes('| `--extra-ms N` | ms | how long in ms |'));
    assert.equal(flags.length, 2 + Object.keys(specOf(TABLE)).length);
    assert.deepEqual(blockRows('heading\n  --a N  one\n      two\n  --b   three\n'), [
      ['--a N', 'one two'],
      ['--b', 'three'],
    ]);
    // A placeholder with punctuation; a line of heads alone shares the next line's text.
    assert.deepEqual(
      blockRows('  --url URL[,URL...]  where\n  --c N  --d N\n  --e N  all three\n'),
      [
        ['--url URL[,URL...]', 'where'],
        ['--c N', 'all three'],
        ['--d N', 'all three'],
        ['--e N', 'all three'],
      ],
    );
    const keys = configDocOf(TABLE).split('\n');
    assert.ok(keys.includes('| `tenants` | per tenant: its limits |'));
    assert.ok(keys.includes('| `port` | `--port` |'));
  });

  test('replaces a generated span and reads it back', () => {
    const doc = 'prose\n<!-- options:x -->\nold\n<!-- /options:x -->\nmore prose\n';
    const next = replaceGenerated(doc, 'x', '| new |');
    assert.equal(generatedSpan(next, 'x'), '| new |');
    assert.ok(next.startsWith('prose\n') && next.endsWith('more prose\n'));
    assert.equal(generatedSpan(doc, 'y'), null);
    assert.throws(() => replaceGenerated(doc, 'y', ''), /no <!-- options:y -->/);
  });
});

describe("kvroute serve's table", () => {
  test('every config key is a row; its flags are unique across the rows and blocks', () => {
    assert.ok(SERVE_CONFIG_KEYS.has('stale-ms') && SERVE_CONFIG_KEYS.has('backends'));
    assert.ok(!SERVE_CONFIG_KEYS.has('nats'), 'NATS is flags only');
    const names = Object.keys(specOf(SERVE_OPTIONS));
    assert.equal(new Set(names).size, names.length);
    assert.ok(names.includes('flow-control') && names.includes('nats-tls-key'));
  });
});
