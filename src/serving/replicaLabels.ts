/**
 * What a client is told about the replica that served it (`x-kvroute-replica`,
 * `x-kvroute-prefill-replica`): a label, `replica-0`, `replica-1`, ... in the order the gateway
 * first placed the replicas (the configured backends in their order), not the replica's name,
 * which is its host:port. An engine's address is the operator's, not a tenant's: with it, a
 * client could talk to the engines behind the gateway. `--expose-replica-addresses` turns the
 * names back on (a trusted bench, a test fleet); `/router/replicas` (admin) maps each label to
 * its replica.
 */
export class ReplicaLabels {
  readonly exposeAddresses: boolean;
  readonly #byName = new Map<string, string>();

  constructor(exposeAddresses: boolean) {
    this.exposeAddresses = exposeAddresses;
  }

  /** Labels for the configured backends, given in their order: replica-0 is the first --backend. */
  static inOrder(exposeAddresses: boolean, names: readonly string[]): ReplicaLabels {
    const labels = new ReplicaLabels(exposeAddresses);
    for (const name of names) labels.of(name);
    return labels;
  }

  /** The replica's label, given on first sight and kept for the process's life. */
  of(name: string): string {
    if (this.exposeAddresses) return name;
    let label = this.#byName.get(name);
    if (label === undefined) {
      label = `replica-${this.#byName.size}`;
      this.#byName.set(name, label);
    }
    return label;
  }

  /** Label by replica name, for the admin's view. */
  table(): Record<string, string> {
    return Object.fromEntries(this.#byName);
  }
}
