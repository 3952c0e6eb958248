/**
 * `kvroute sim --routers LIST --sync-ms LIST | --sync none`: gateways modelled over the fleet.
 * Each router count above 1 runs once per sync delay (ms, or `none`: no sharing); a count of 1
 * runs once. Without --routers, one router and nothing in the result says otherwise.
 */
import { type Flags, UsageError } from './args.ts';
import { options, str } from './options/table.ts';

export interface RouterSetup {
  routers: number;
  /** Records between routers take this long; null: not shared. */
  syncMs: number | null;
}

/** The sync delay when several routers are asked for and none is given. */
export const DEFAULT_SYNC_MS = 1;

/** The gateways' options, one row each (sim's table); read as lists below. */
// biome-ignore format: one option a line
export const ROUTER_SETUPS_OPTIONS = options({
  routers: str('LIST', 'router counts, e.g. 1,4', { default: 1, section: 'gateways (several routers over the fleet, arrivals round robin)' }),
  'sync-ms': str('LIST', "with several routers: each one's decisions and releases reach the others this many ms late, e.g. 1,10,100 (default {default}); none: never", { default: DEFAULT_SYNC_MS, unit: 'ms' }),
  sync: str('none', 'the same as --sync-ms none: gateways that share no state'),
});

/** The setups to run, in the order given; null without --routers, --sync-ms or --sync. */
export function readRouterSetups(flags: Flags): RouterSetup[] | null {
  const routersRaw = flags.string('routers');
  const syncRaw = flags.string('sync-ms');
  const sync = flags.string('sync');
  if (routersRaw === undefined && syncRaw === undefined && sync === undefined) return null;
  if (sync !== undefined && sync !== 'none') {
    throw new UsageError(`--sync takes none (gateways that share nothing), got '${sync}'`);
  }
  if (sync !== undefined && syncRaw !== undefined) {
    throw new UsageError('--sync none and --sync-ms contradict each other: give one');
  }
  const counts = listOf(routersRaw ?? '1', '--routers', (item) => {
    const n = Number(item);
    if (!Number.isInteger(n) || n < 1 || n > 64) {
      throw new UsageError(`--routers takes router counts from 1 to 64, got '${item}'`);
    }
    return n;
  });
  const delays =
    sync === 'none'
      ? [null]
      : listOf(syncRaw ?? String(DEFAULT_SYNC_MS), '--sync-ms', (item) => {
          if (item === 'none') return null;
          const ms = Number(item);
          if (item === '' || !Number.isFinite(ms) || ms < 0) {
            throw new UsageError(`--sync-ms takes delays in ms (0 or more) or none, got '${item}'`);
          }
          return ms;
        });
  const setups: RouterSetup[] = [];
  for (const routers of counts) {
    if (routers === 1) setups.push({ routers, syncMs: null });
    else for (const syncMs of delays) setups.push({ routers, syncMs });
  }
  return setups;
}

function listOf<T>(raw: string, flag: string, read: (item: string) => T): T[] {
  const items = raw.split(',').map((s) => s.trim());
  if (items.some((s) => s === '')) throw new UsageError(`${flag} has an empty item: '${raw}'`);
  return [...new Set(items)].map(read);
}
