// The one place that picks the runtime: NATS mode when a NATS URL is configured, embedded otherwise.
import { embeddedTopology } from './embedded.ts';
import { natsTopology } from './nats.ts';
import type { Topology, TopologyDeps } from './topology.ts';

export type { Topology, TopologyDeps } from './topology.ts';

export async function openTopology(d: TopologyDeps): Promise<Topology> {
  return d.config.natsUrl ? natsTopology(d, d.config.natsUrl) : embeddedTopology(d);
}
