#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader, so `npx kvroute` works right
// after `npm ci` with no build step and no stale output.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
