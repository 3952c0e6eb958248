/**
 * Rewrites docs/configuration.md's generated tables from the option tables:
 * `npx tsx src/cli/options/writeDocs.ts` (after adding or changing an option).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { replaceGenerated } from './docs.ts';
import { DOC_SPANS } from './spans.ts';

const path = new URL('../../../docs/configuration.md', import.meta.url);
let doc = readFileSync(path, 'utf8');
for (const [name, table] of Object.entries(DOC_SPANS)) doc = replaceGenerated(doc, name, table());
writeFileSync(path, doc);
process.stdout.write(`docs/configuration.md: ${Object.keys(DOC_SPANS).join(', ')} rewritten\n`);
