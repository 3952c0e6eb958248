/** The engine server's public surface (the gateway embeds fleets through it). */
export { type EngineServerHandle, type EngineServerOptions, startEngineServer } from './server.ts';
export { ENGINE_DEFAULTS, type EngineOptions } from '../options.ts';
export { SERVER_DEFAULTS } from './options.ts';
