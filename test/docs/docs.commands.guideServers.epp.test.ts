/**
 * The first command block of docs/kubernetes.md: the endpoint picker, run as a new user would type it
 * (test/support/guideBlocks.ts): each line exits 0, each curl gets an answer in vLLM's shape.
 * The other guides' blocks that start servers: docs.commands.guideServers.*.test.ts; those that
 * start none: docs.commands.guideRuns.*.test.ts. Nothing here measures time.
 */
import { guideBlockTests, serverGuides } from '../support/guideBlocks.ts';

guideBlockTests("a server guide's first command block runs (epp)", serverGuides('epp'), true);
