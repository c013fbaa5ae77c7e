/**
 * The one list of resources: the only place a resource is registered. Each entry is the definition its
 * folder's index.ts exports (platform/module.ts `defineResource`): its name, migrations, event types and
 * module factory. Everything else is derived from this list: the store's one migration history, the event
 * catalogue, and the modules the composition root makes (in this order, the order the API serves their
 * routes). A new resource is a new folder and one line here; the composition root's type check then asks
 * for what its module needs.
 */
import { type EventCatalogue, eventCatalogue } from './platform/events/catalog.js';
import { migrationHistory, PLATFORM_MIGRATIONS } from './platform/store/migrations/index.js';
import { ACCOUNT_RESOURCE } from './resources/account/index.js';
import { ADDRESSES_RESOURCE } from './resources/addresses/index.js';
import { ALERTS_RESOURCE } from './resources/alerts/index.js';
import { BILLING_RESOURCE } from './resources/billing/index.js';
import { CATALOG_RESOURCE } from './resources/catalog/index.js';
import { DNS_RESOURCE } from './resources/dns/index.js';
import { EVENTS_RESOURCE } from './resources/events/index.js';
import { INSTANCES_RESOURCE } from './resources/instances/index.js';
import { METRICS_RESOURCE } from './resources/metrics/index.js';
import { NETWORKING_RESOURCE } from './resources/networking/index.js';
import { PUBLIC_IPS_RESOURCE } from './resources/public-ips/index.js';
import { SNAPSHOTS_RESOURCE } from './resources/snapshots/index.js';
import { SSH_KEYS_RESOURCE } from './resources/ssh-keys/index.js';
import { VOLUMES_RESOURCE } from './resources/volumes/index.js';
import { VPNS_RESOURCE } from './resources/vpns/index.js';
import { WEBHOOKS_RESOURCE } from './resources/webhooks/index.js';

export const RESOURCES = [
  ACCOUNT_RESOURCE,
  CATALOG_RESOURCE,
  INSTANCES_RESOURCE,
  NETWORKING_RESOURCE,
  VOLUMES_RESOURCE,
  VPNS_RESOURCE,
  PUBLIC_IPS_RESOURCE,
  SNAPSHOTS_RESOURCE,
  SSH_KEYS_RESOURCE,
  EVENTS_RESOURCE,
  WEBHOOKS_RESOURCE,
  METRICS_RESOURCE,
  BILLING_RESOURCE,
  ALERTS_RESOURCE,
  DNS_RESOURCE,
  // No routes: the address pools the others take from (its migrations only).
  ADDRESSES_RESOURCE,
] as const;

/**
 * The store's one migration history: the platform's migrations and every resource's, replayed in the
 * order of their numbers whatever the list's order (platform/store/migrations/index.ts).
 */
export const MIGRATIONS = migrationHistory(
  PLATFORM_MIGRATIONS,
  ...RESOURCES.flatMap((resource) => ('migrations' in resource ? [resource.migrations] : [])),
);

/**
 * The order `GET /v1/events/types` (and the deliveries' `event_type` filter) has always listed the event
 * families in, kept so that answer does not change. It registers nothing: a family not named here (a new
 * resource's) follows these, in the list's order.
 */
const LISTED_EVENT_FAMILIES = [
  'instance',
  'volume',
  'snapshot',
  'firewall_rule',
  'vpn',
  'public_ip',
  'invoice',
  'api_key',
  'ssh_key',
  'webhook',
  'alert',
];

/** Where a resource's event types are listed: by their family's place above, else after all of those. */
function listingPlace(types: Readonly<Record<string, unknown>>): number {
  const first = Object.keys(types)[0] ?? '';
  const place = LISTED_EVENT_FAMILIES.indexOf(first.slice(0, first.indexOf('.')));
  return place === -1 ? LISTED_EVENT_FAMILIES.length : place;
}

/** The event catalogue at run time: every resource's declared types (platform/events/catalog.ts). */
export const EVENT_CATALOGUE: EventCatalogue = eventCatalogue(
  ...RESOURCES.flatMap((resource) => ('events' in resource ? [resource.events] : [])).sort(
    (a, b) => listingPlace(a) - listingPlace(b),
  ),
);
