/** `kvroute --version` and `kvroute --help`: the version from package.json, one line per command. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, runCli } from '../support/cli.ts';

test('kvroute --version prints the package version', () => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const flag of ['--version', '-V']) {
    const out = runCli([flag]);
    assert.equal(out.status, 0, out.stderr);
    assert.equal(out.stdout, `kvroute ${version}\n`);
  }
});

test('kvroute --help lists every command, one line each', () => {
  const out = runCli(['--help']);
  assert.equal(out.status, 0);
  // Every CLI module with a `run` entry point is a command.
  const commands = readdirSync(join(ROOT, 'src/cli'))
    .filter((f) => f.endsWith('.ts'))
    .filter((f) =>
      /^export async function run\(/m.test(readFileSync(join(ROOT, 'src/cli', f), 'utf8')),
    )
    .map((f) => f.replace(/\.ts$/, ''));
  assert.ok(commands.length >= 6, commands.join(' '));
  for (const name of commands) {
    const lines = out.stdout.split('\n').filter((l) => new RegExp(`^  ${name}\\s+\\S`).test(l));
    assert.equal(lines.length, 1, `${name}: ${JSON.stringify(lines)}`);
  }
  assert.equal(runCli([]).status, 2, 'no command is a usage error');
});

test("an unknown command is named with the commands there are, even one of Object's own names", () => {
  for (const name of ['bogus', 'constructor', 'toString', '__proto__']) {
    const out = runCli([name]);
    assert.equal(out.status, 2, `${name}: ${out.stderr}`);
    assert.match(out.stderr, new RegExp(`^kvroute: unknown command '${name}'; commands: plan, `));
    assert.doesNotMatch(out.stderr, /TypeError|\n {4}at /, name);
  }
});
