/**
 * The switch port that joins a logical switch to a router port: the VPC's own switch to its router,
 * and the public switch to the router's gateway port. One shape for both, so the two cannot drift.
 */
import type { Row } from './topology.js';

export function routerAttachment(name: string, routerPort: string, externalIds: Record<string, string>): Row {
  return {
    table: 'Logical_Switch_Port',
    key: name,
    columns: {
      name,
      type: 'router',
      addresses: ['router'],
      port_security: [],
      options: { 'router-port': routerPort },
      dhcpv4_options: { refs: [] },
      external_ids: externalIds,
    },
  };
}
