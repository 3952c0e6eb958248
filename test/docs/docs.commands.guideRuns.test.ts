/**
 * Every guide's first command block that starts no server, only commands that end (the other
 * guides': docs.commands.guideServers.*.test.ts), run as a new user would type it
 * (test/support/guideBlocks.ts): each line exits 0, each curl gets an answer in vLLM's shape.
 * These blocks are CPU-bound (simulations, plans), so they run one after another: at once on a
 * busy 2-core host they only share its CPU and can outlast the runner's hang guard. Nothing here
 * measures time.
 */
import { guidePaths } from '../support/docs.ts';
import { guideBlockTests, startsServer } from '../support/guideBlocks.ts';

guideBlockTests(
  "every guide's first command block runs",
  guidePaths().filter((p) => !startsServer(p)),
  false,
);
