/**
 * The event catalogue at run time, put together here with the composition root from each resource's
 * declared types (its `events.ts`), in the order the API lists them (platform/events/catalog.ts).
 */
import { eventCatalogue } from './platform/events/catalog.js';
import { API_KEY_EVENTS } from './resources/account/events.js';
import { ALERT_EVENTS } from './resources/alerts/events.js';
import { INVOICE_EVENTS } from './resources/billing/events.js';
import { INSTANCE_EVENTS } from './resources/instances/events.js';
import { FIREWALL_RULE_EVENTS } from './resources/networking/events.js';
import { PUBLIC_IP_EVENTS } from './resources/public-ips/events.js';
import { SNAPSHOT_EVENTS } from './resources/snapshots/events.js';
import { SSH_KEY_EVENTS } from './resources/ssh-keys/events.js';
import { VOLUME_EVENTS } from './resources/volumes/events.js';
import { VPN_EVENTS } from './resources/vpns/events.js';
import { WEBHOOK_EVENTS } from './resources/webhooks/events.js';

export const EVENT_CATALOGUE = eventCatalogue(
  INSTANCE_EVENTS,
  VOLUME_EVENTS,
  SNAPSHOT_EVENTS,
  FIREWALL_RULE_EVENTS,
  VPN_EVENTS,
  PUBLIC_IP_EVENTS,
  INVOICE_EVENTS,
  API_KEY_EVENTS,
  SSH_KEY_EVENTS,
  WEBHOOK_EVENTS,
  ALERT_EVENTS,
);
