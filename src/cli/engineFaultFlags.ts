/**
 * The engine's fault flags, shared by `kvroute engine` (the simulated server) and `kvroute sim`
 * (the simulated fleet; its replica list says which replicas have them): what the router's
 * self-audit must catch. See `src/engine/server/faults.ts`.
 */
import { existsSync } from 'node:fs';
import { DROP_EVENT_KINDS, type EngineFaults } from '../engine/server/faults.ts';
import { type Flags, flagSpec, UsageError } from './args.ts';

export const ENGINE_FAULT_FLAGS = flagSpec({
  string: 'fault-drop-events fault-silent-reset-s fault-chat-template',
  boolean: 'fault-lie',
});

export const ENGINE_FAULT_HELP = `faults (to show the router's self-audit; none by default)
  --fault-drop-events K   never publish KV events of kind K: ${DROP_EVENT_KINDS.join(' | ')}
  --fault-silent-reset-s N  every N s (modelled) empty the prefix cache with no AllBlocksCleared
                        and no sequence restart (a restart or sleep the router is not told of)
  --fault-lie           lie consistently: publish every prompt's blocks as stored on arrival,
                        never publish BlockRemoved, report cached_tokens = the prompt
`;

export const ENGINE_CHAT_FAULT_HELP = `  --fault-chat-template FILE  render chats for generation with this Jinja template (/tokenize
                        keeps the configured one): the gateway's tokens differ from the engine's
`;

/** The faults the flags name; undefined when none is given. */
export function readEngineFaultFlags(flags: Flags, withChat = true): EngineFaults | undefined {
  const faults: EngineFaults = {};
  const drop = flags.oneOf('fault-drop-events', DROP_EVENT_KINDS);
  if (drop !== undefined) faults.dropEvents = drop;
  const resetS = flags.positive('fault-silent-reset-s');
  if (resetS !== undefined) faults.silentResetS = resetS;
  if (flags.bool('fault-lie')) faults.lie = true;
  const template = withChat ? flags.string('fault-chat-template') : undefined;
  if (template !== undefined) {
    if (!existsSync(template)) {
      throw new UsageError(`--fault-chat-template: no such file '${template}'`);
    }
    faults.chatTemplate = template;
  }
  return Object.keys(faults).length > 0 ? faults : undefined;
}
