/**
 * The first command block of docs/flow-control.md, docs/nats.md and docs/simulator.md (fleet
 * simulations), run as a new user would type it (test/support/guideBlocks.ts): each line exits 0.
 * The other guides' blocks that start no server: docs.commands.guideRuns.rest.test.ts; those
 * that start servers: docs.commands.guideServers.*.test.ts. These blocks are CPU-bound, so they
 * run one after another: at once on a busy 2-core host they only share its CPU and can outlast
 * the runner's hang guard. Nothing here measures time.
 */
import { guideBlockTests, runGuides } from '../support/guideBlocks.ts';

guideBlockTests("a guide's first command block runs (fleet simulations)", runGuides('sims'), false);
