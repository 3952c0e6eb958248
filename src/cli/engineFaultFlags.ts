/**
 * The engine's fault flags, shared by `kvroute engine` (the simulated server) and `kvroute sim`
 * (the simulated fleet; its replica list says which replicas have them): what the router's
 * self-audit must catch. See `src/engine/server/faults.ts`. Declared as rows of an option table
 * (`options/table.ts`).
 */
import { existsSync } from 'node:fs';
import { DROP_EVENT_KINDS, type EngineFaults } from '../engine/server/faults.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { bool, num, oneOf, options, str } from './options/table.ts';

/** The fault flags, one row each. */
// biome-ignore format: one option a line
export const ENGINE_FAULT_OPTIONS = options({
  'fault-drop-events': oneOf(DROP_EVENT_KINDS, 'K', 'never publish KV events of kind K: {values}', { section: "faults (to show the router's self-audit; none by default)" }),
  'fault-silent-reset-s': num('N', 'every N s (modelled) empty the prefix cache with no AllBlocksCleared and no sequence restart (a restart or sleep the router is not told of)', { above: 0 }),
  'fault-lie': bool("lie consistently: publish every prompt's blocks as stored on arrival, never publish BlockRemoved, report cached_tokens = the prompt"),
  'fault-chat-template': str('FILE', "render chats for generation with this Jinja template (/tokenize keeps the configured one): the gateway's tokens differ from the engine's"),
});

export const ENGINE_FAULT_FLAGS = specOf(ENGINE_FAULT_OPTIONS);

/** The faults the flags name; undefined when none is given. */
export function readEngineFaultFlags(flags: Flags, withChat = true): EngineFaults | undefined {
  const option = readerOf(ENGINE_FAULT_OPTIONS, flags);
  const faults: EngineFaults = {};
  const drop = option('fault-drop-events');
  if (drop !== undefined) faults.dropEvents = drop;
  const resetS = option('fault-silent-reset-s');
  if (resetS !== undefined) faults.silentResetS = resetS;
  if (option('fault-lie')) faults.lie = true;
  const template = withChat ? option('fault-chat-template') : undefined;
  if (template !== undefined) {
    if (!existsSync(template)) {
      throw new UsageError(`--fault-chat-template: no such file '${template}'`);
    }
    faults.chatTemplate = template;
  }
  return Object.keys(faults).length > 0 ? faults : undefined;
}
