#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader, so `npx kvroute` works right
// after `npm ci` with no build step and no stale output.
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

register();
const args = process.argv.slice(2);
const pages = await import('../src/cli/hugePages.ts');
if (pages.wantsHugePages(args)) {
  process.exitCode = await pages.rerunWithHugePages(fileURLToPath(import.meta.url), args);
} else {
  pages.followParent();
  const { main } = await import('../src/cli/main.ts');
  process.exitCode = await main(args);
}
