/** The engine server's public surface (embedded fleets and the CLI start servers through it). */
export { type EngineServerHandle, type EngineServerOptions, startEngineServer } from './server.ts';
export { ENGINE_DEFAULTS, type EngineOptions } from '../options.ts';
export { SERVER_DEFAULTS } from './options.ts';
