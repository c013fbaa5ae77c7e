/**
 * The DNS server for the platform's names (docs/api.md, "DNS"), as the platform runs it: no routes, a
 * listener started with the server and stopped before the store closes. The admin CLI starts none.
 */
import { isIP } from 'node:net';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { defineResource, type ModuleParts } from '../../platform/module.js';
import type { Database } from '../../platform/store/schema.js';
import { DnsResponder } from './responder.js';
import { DnsServer } from './server.js';

export interface DnsSettings {
  /** Reads of what is committed (Store.committedReads): an answer never waits on a write in progress. */
  db: Kysely<Database>;
  /** NIMBUS_DNS_PORT (0: no DNS server), and NIMBUS_HOST: the address bound, whose family picks the UDP socket's. */
  port: number;
  host: string;
  /** NIMBUS_PUBLIC_DOMAIN. */
  domain: string;
  publicIpPools: Readonly<Record<string, string>>;
}

export function dnsModule(settings: DnsSettings): ModuleParts {
  // Off unless NIMBUS_DNS_PORT names a port: the module has no part then.
  if (settings.port <= 0) return {};
  const responder = new DnsResponder(settings.db, {
    domain: settings.domain,
    publicIpPools: settings.publicIpPools,
    nameserverAddress: isIP(settings.host) === 4 && settings.host !== '0.0.0.0' ? settings.host : null,
    now: () => Date.now() / 1000,
  });
  let logger: Logger | null = null;
  // A socket or a query that failed: the server goes on answering.
  const server = new DnsServer(
    (message, transport) => responder.answer(message, transport),
    (error) => logger?.warn({ err: error }, 'dns: a query or socket failed'),
  );
  return {
    prepare: async (host) => {
      logger = host.logger;
    },
    start: async () => {
      const port = await server.listen(settings.port, settings.host);
      logger?.info({ dns: `${settings.host}:${port}` }, 'dns server listening (udp and tcp)');
    },
    stop: () => server.close(),
  };
}

/** The resource as src/resources.ts lists it. */
export const DNS_RESOURCE = defineResource({
  name: 'dns',
  module: dnsModule,
});
