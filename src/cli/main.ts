/**
 * `kvroute <command>`: dispatches to one module per command. Usage errors and known failures
 * print one line and exit 2; nothing prints a stack trace at the user.
 */
import { readFileSync } from 'node:fs';
import { UsageError } from './args.ts';

type CommandModule = { run(argv: string[]): Promise<number> };

/** Each command and what it does, in the order `kvroute --help` lists them. */
const SUMMARIES = {
  plan: 'capacity plan from the cost model',
  sim: 'fleet simulator: policies side by side, replica search, admission bound',
  engine: 'simulated vLLM-compatible engine server',
  serve: 'KV-aware OpenAI-compatible gateway, admission control, live dashboard at /',
  epp: 'endpoint picker for the Gateway API inference extension (Envoy ext_proc gRPC)',
  bench: 'open-loop load generator for any endpoint',
  demo: 'live stacks (engines and gateway as processes) beside the simulator',
  calibrate: 'fit the cost model to a server or a Vidur profile',
  model: 'write a tiny llama.cpp model (GGUF) for tests and demos',
};

/** Each command's module, loaded when it runs. */
const COMMANDS: Record<string, () => Promise<CommandModule>> = {
  plan: () => import('./plan.ts'),
  sim: () => import('./sim.ts'),
  engine: () => import('./engine.ts'),
  serve: () => import('./serve.ts'),
  epp: () => import('./epp.ts'),
  bench: () => import('./bench.ts'),
  demo: () => import('./demo.ts'),
  calibrate: () => import('./calibrate.ts'),
  model: () => import('./model.ts'),
} satisfies Record<keyof typeof SUMMARIES, () => Promise<CommandModule>>;

function usage(): string {
  const lines = Object.entries(SUMMARIES).map(
    ([name, summary]) => `  ${name.padEnd(10)} ${summary}`,
  );
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
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    process.stderr.write(
      `kvroute: unknown command '${name}'; commands: ${Object.keys(COMMANDS).join(', ')}\n`,
    );
    return 2;
  }
  try {
    return await (await load()).run(rest);
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
