/**
 * `kvroute <command>`: dispatches to one module per command. Usage errors and known failures
 * print one line and exit 2; nothing prints a stack trace at the user.
 */
import { readFileSync } from 'node:fs';
import { UsageError } from './args.ts';

type CommandModule = { run(argv: string[]): Promise<number> };

const COMMANDS: Record<string, { summary: string; load: () => Promise<CommandModule> }> = {
  plan: { summary: 'capacity plan from the cost model', load: () => import('./plan.ts') },
  sim: {
    summary: 'fleet simulator: policies side by side, replica search, admission bound',
    load: () => import('./sim.ts'),
  },
  engine: { summary: 'simulated vLLM-compatible engine server', load: () => import('./engine.ts') },
  serve: {
    summary: 'KV-aware OpenAI-compatible gateway, admission control, live dashboard at /',
    load: () => import('./serve.ts'),
  },
  epp: {
    summary: 'endpoint picker for the Gateway API inference extension (Envoy ext_proc gRPC)',
    load: () => import('./epp.ts'),
  },
  bench: { summary: 'open-loop load generator for any endpoint', load: () => import('./bench.ts') },
  demo: {
    summary: 'live stacks (engines and gateway as processes) beside the simulator',
    load: () => import('./demo.ts'),
  },
  calibrate: {
    summary: 'fit the cost model to a server or a Vidur profile',
    load: () => import('./calibrate.ts'),
  },
  model: {
    summary: 'write a tiny llama.cpp model (GGUF) for tests and demos',
    load: () => import('./model.ts'),
  },
};

function usage(): string {
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: kvroute <command> [flags]\n\ncommands:\n${lines.join('\n')}\n\nkvroute <command> --help for its flags; kvroute --version for the version`;
}

/** The package's version, from package.json (one source for npm and the CLI). */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
  return String(pkg.version);
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    process.stdout.write(`kvroute ${version()}\n`);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${usage()}\n`);
    return name ? 0 : 2;
  }
  // An own key only: `kvroute constructor` is an unknown command, not Object's constructor.
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(
      `kvroute: unknown command '${name}'; commands: ${Object.keys(COMMANDS).join(', ')}\n`,
    );
    return 2;
  }
  try {
    return await (await command.load()).run(rest);
  } catch (err) {
    if (err instanceof UsageError || isKnownError(err)) {
      process.stderr.write(`kvroute ${name}: ${(err as Error).message}\n`);
      return 2;
    }
    throw err;
  }
}

/** Errors from the cores that carry a stable `code` are user-facing: print them, no trace. */
function isKnownError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
}
