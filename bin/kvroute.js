#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader, so `npx kvroute` works right
// after `npm ci` with no build step and no stale output.
import { fileURLToPath } from 'node:url';
import { followParent, rerunWithHugePages, wantsHugePages } from './hugePages.js';

const args = process.argv.slice(2);
if (wantsHugePages(args)) {
  process.exitCode = await rerunWithHugePages(fileURLToPath(import.meta.url), args);
} else {
  followParent();
  const { register } = await import('tsx/esm/api');
  register();
  const { main } = await import('../src/cli/main.ts');
  process.exitCode = await main(args);
}
