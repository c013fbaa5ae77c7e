/**
 * The event catalogue: every event type Nimbus writes, with the shape of its `data`
 * (docs/design.md, "Events and webhooks"). The outbox writer (platform/events/outbox.ts) takes only these
 * types, each with its own data, so a misspelt type or a missing field is a compile error; `GET /v1/events`
 * filters and webhook subscriptions take their allowed values from here. Types of resources still being built
 * are listed so subscriptions can name them; their data grows with their resource.
 */
import { type Static, type TObject, Type } from '@sinclair/typebox';

const id = (description: string) => Type.String({ description });

const InstanceEvent = Type.Object(
  {
    instance_id: id('The instance'),
    name: Type.String(),
    status: Type.String({ description: 'The instance status after the change (`deleted` once gone)' }),
    forced: Type.Optional(Type.Boolean({ description: 'instance.stopped: a forced stop' })),
    changed: Type.Optional(
      Type.Array(Type.String(), { description: 'instance.updated: the fields changed' }),
    ),
    instance_type: Type.Optional(Type.String({ description: 'instance.resized: the new type' })),
    reason: Type.Optional(Type.String({ description: 'instance.error: why (boot_failed, driver_failure)' })),
    message: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

const VolumeEvent = Type.Object({
  volume_id: id('The volume'),
  name: Type.String(),
  status: Type.String(),
  instance_id: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description: 'The instance it is attached to (volume.detached: the one it left)',
    }),
  ),
  size_gb: Type.Optional(Type.Integer({ description: 'volume.resized: the new size' })),
  device_name: Type.Optional(
    Type.Union([Type.String(), Type.Null()], { description: 'Its device on the instance (`/dev/vdb`…)' }),
  ),
  kind: Type.Optional(Type.String({ description: '`data`, or `root` for the disk of an instance' })),
});

const nullableId = (description: string) => Type.Union([Type.String(), Type.Null()], { description });

const SnapshotEvent = Type.Object({
  snapshot_id: id('The snapshot'),
  name: Type.String(),
  status: Type.String({ description: 'The snapshot status after the change (`deleted` once gone)' }),
  kind: Type.Optional(Type.String({ description: '`manual` or `scheduled`' })),
  source_volume_id: Type.Optional(nullableId('The volume it was taken of')),
  source_instance_id: Type.Optional(nullableId('The instance whose root volume it was taken of')),
  size_gb: Type.Optional(Type.Integer()),
  error: Type.Optional(nullableId('snapshot.failed: why')),
  volume_id: Type.Optional(
    Type.String({
      description: 'snapshot.restored: the volume written (new, overwritten, or a root volume)',
    }),
  ),
  instance_id: Type.Optional(
    Type.Union([Type.String(), Type.Null()], {
      description: 'snapshot.restored: the instance whose root disk was restored',
    }),
  ),
});

const FirewallRuleEvent = Type.Object({
  firewall_rule_id: id('The firewall rule'),
  name: Type.String(),
  region: Type.Optional(Type.String()),
  direction: Type.Optional(Type.String({ description: '`inbound` or `outbound`' })),
  action: Type.Optional(Type.String({ description: '`allow` or `deny`' })),
  protocol: Type.Optional(Type.String({ description: '`tcp`, `udp`, `icmp` or `all`' })),
  ports: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  priority: Type.Optional(Type.Integer()),
  enabled: Type.Optional(Type.Boolean()),
  changed: Type.Optional(
    Type.Array(Type.String(), { description: 'firewall_rule.updated: the fields the change named' }),
  ),
});
const VpnEvent = Type.Object({
  vpn_id: id('The VPN'),
  name: Type.String(),
  status: Type.String({ description: 'The VPN status after the change (`deleted` once gone)' }),
  region: Type.Optional(Type.String()),
  endpoint: Type.Optional(Type.String({ description: 'The gateway, `<public IPv4>:<port>`' })),
  peer_id: Type.Optional(Type.String({ description: 'vpn.peer_added, vpn.peer_removed: the peer' })),
  peer_name: Type.Optional(Type.String()),
  peer_address: Type.Optional(Type.String({ description: "The peer's tunnel address" })),
  peer_public_key: Type.Optional(Type.String()),
});
const InvoiceEvent = Type.Object({ invoice_id: id('The invoice'), status: Type.String() });
const WebhookEvent = Type.Object({
  webhook_id: id('The webhook subscription'),
  reason: Type.Optional(Type.String({ description: 'webhook.disabled: why' })),
});
const nullableNumber = (description: string) => Type.Union([Type.Number(), Type.Null()], { description });
const AlertEvent = Type.Object({
  alert_id: id('The alert policy'),
  incident_id: nullableId('The incident (null on a test notification)'),
  name: Type.String({ description: 'The policy name' }),
  instance_id: nullableId('The instance (null on a test notification)'),
  instance_name: Type.Union([Type.String(), Type.Null()]),
  metric: Type.Union([Type.String(), Type.Null()], { description: 'A metric policy: the metric watched' }),
  compare: Type.Union([Type.String(), Type.Null()], { description: '`above` or `below`' }),
  state: Type.Union([Type.String(), Type.Null()], { description: 'A state policy: `error` or `stuck`' }),
  window: Type.Union([Type.String(), Type.Null()]),
  value: nullableNumber('alert.firing: the window average that fired; alert.resolved: the last one'),
  threshold: nullableNumber('The threshold (a stuck policy: the window in seconds)'),
  started_at: Type.Union([Type.String(), Type.Null()]),
  resolved_at: Type.Union([Type.String(), Type.Null()]),
  resolution: Type.Union([Type.String(), Type.Null()], {
    description: 'alert.resolved: recovered, instance_stopped, instance_deleted, no_longer_targeted…',
  }),
  console_url: Type.Union([Type.String(), Type.Null()], { description: 'The instance in the console' }),
  test: Type.Optional(
    Type.Boolean({ description: 'true on a test notification (POST /v1/alerts/{id}/test)' }),
  ),
});

const ApiKeyCreated = Type.Object(
  { api_key_id: id('The API key'), name: Type.String(), permissions: Type.Array(Type.String()) },
  { additionalProperties: false },
);
const ApiKeyDeleted = Type.Object(
  { api_key_id: id('The API key'), name: Type.String() },
  { additionalProperties: false },
);
const SshKeyEvent = Type.Object(
  { ssh_key_id: id('The SSH key'), name: Type.String(), fingerprint: Type.String() },
  { additionalProperties: false },
);

// Public IPs (issue 32): every event carries the address and where it is assigned.
const PublicIpEvent = Type.Object(
  {
    public_ip_id: id('The public IP'),
    name: Type.String(),
    address: Type.String({ description: 'The IPv4 address' }),
    region: Type.String(),
    instance_id: nullableId(
      'The instance it is assigned to (public_ip.unassigned: the one it left; null: none)',
    ),
  },
  { additionalProperties: false },
);

interface CatalogEntry {
  description: string;
  data: TObject;
}

const entry = <T extends TObject>(description: string, data: T) => ({ description, data });

export const EVENT_CATALOG = {
  'instance.created': entry('An instance was created; it is starting', InstanceEvent),
  'instance.started': entry('An instance finished booting and is running', InstanceEvent),
  'instance.stopped': entry('An instance stopped (gracefully, or forced)', InstanceEvent),
  'instance.restarted': entry('An instance finished a restart and is running', InstanceEvent),
  'instance.resized': entry('An instance has its new type', InstanceEvent),
  'instance.updated': entry('An instance’s name, tags, monitoring or backup schedule changed', InstanceEvent),
  'instance.deleted': entry('An instance and its root volume are gone', InstanceEvent),
  'instance.error': entry('An instance failed (boot failure, or the driver kept failing)', InstanceEvent),
  'volume.created': entry('A volume was created', VolumeEvent),
  'volume.attached': entry('A volume was attached to an instance', VolumeEvent),
  'volume.detached': entry('A volume was detached', VolumeEvent),
  'volume.resized': entry('A volume grew', VolumeEvent),
  'volume.deleted': entry('A volume is gone', VolumeEvent),
  'snapshot.created': entry('A snapshot was asked for', SnapshotEvent),
  'snapshot.completed': entry('A snapshot is available', SnapshotEvent),
  'snapshot.failed': entry('A snapshot failed', SnapshotEvent),
  'snapshot.deleted': entry('A snapshot is gone', SnapshotEvent),
  'snapshot.restored': entry('A snapshot was restored', SnapshotEvent),
  'firewall_rule.created': entry('A firewall rule was created', FirewallRuleEvent),
  'firewall_rule.updated': entry('A firewall rule changed', FirewallRuleEvent),
  'firewall_rule.deleted': entry('A firewall rule is gone', FirewallRuleEvent),
  'vpn.created': entry('A VPN was created; it is provisioning', VpnEvent),
  'vpn.active': entry('A VPN is active', VpnEvent),
  'vpn.peer_added': entry('A peer was added to a VPN', VpnEvent),
  'vpn.peer_removed': entry('A peer was removed from a VPN', VpnEvent),
  'vpn.deleted': entry('A VPN is gone', VpnEvent),
  'public_ip.created': entry('A public IP was allocated (or made with an instance)', PublicIpEvent),
  'public_ip.assigned': entry('A public IP was assigned to an instance', PublicIpEvent),
  'public_ip.unassigned': entry('A public IP left its instance', PublicIpEvent),
  'public_ip.deleted': entry('A public IP was released', PublicIpEvent),
  'invoice.created': entry('An invoice was issued', InvoiceEvent),
  'invoice.paid': entry('An invoice was paid', InvoiceEvent),
  'invoice.past_due': entry('An invoice is past due; the account is past due', InvoiceEvent),
  'api_key.created': entry('An API key was created', ApiKeyCreated),
  'api_key.deleted': entry('An API key was deleted', ApiKeyDeleted),
  'ssh_key.created': entry('An SSH key was uploaded', SshKeyEvent),
  'ssh_key.deleted': entry('An SSH key was deleted', SshKeyEvent),
  'webhook.test': entry('A test delivery asked for by the user', WebhookEvent),
  'webhook.disabled': entry('A webhook subscription was disabled', WebhookEvent),
  'alert.firing': entry('An alert policy started firing', AlertEvent),
  'alert.resolved': entry('An alert incident resolved', AlertEvent),
} satisfies Record<string, CatalogEntry>;

export type EventCatalog = typeof EVENT_CATALOG;
export type EventType = keyof EventCatalog;
export type EventData<T extends EventType> = Static<EventCatalog[T]['data']>;

export const EVENT_TYPES = Object.keys(EVENT_CATALOG) as EventType[];

/** The families (`instance`, `volume`…) the catalogue has, for `instance.*`-style filters. */
export const EVENT_FAMILIES = [...new Set(EVENT_TYPES.map((type) => type.slice(0, type.indexOf('.'))))];

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(EVENT_CATALOG, type);
}

/** The data every instance event carries; the rest is per type. */
export type InstanceEventData = Static<typeof InstanceEvent>;

/** The data every volume event carries; the rest is per type. */
export type VolumeEventData = Static<typeof VolumeEvent>;

/** The data every snapshot event carries; the rest is per type. */
export type SnapshotEventData = Static<typeof SnapshotEvent>;
