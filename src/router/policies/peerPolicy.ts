/**
 * What the peer projects' tunable policies (`llmd`, `llmd-precise`, `sglang`) share: each brings
 * its project's filters only (`ownFilters`: the router offers it every replica that is up), and
 * its tunables are a table of that project's defaults, each an option of the same name, resolved
 * once here (`withDefaults`: an option left out keeps its default).
 */
import { withDefaults } from '../../util/withDefaults.ts';
import type { Pick, PickInput, Policy } from '../policy.ts';

/** A table of defaults as options: any field may be given. */
export type Overrides<T> = { readonly [K in keyof T]?: T[K] | null };

export abstract class PeerPolicy<T extends object> implements Policy {
  abstract readonly name: string;
  readonly ownFilters = true;
  /** The defaults, with each field `options` gave taken from there. */
  readonly tunables: Readonly<T>;

  constructor(defaults: T, options: Overrides<T>) {
    this.tunables = withDefaults(defaults, options);
  }

  abstract pick(input: PickInput): Pick;
}
