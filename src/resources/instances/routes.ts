import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Protection } from '../../platform/domain/protection.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { ListQuery, ResourceName, StringEnum, Tags } from '../../platform/http/schemas.js';
import { IMAGES, INSTANCE_TYPES, REGION_NAMES } from '../catalog/catalog.js';
import { BackupSchedule } from '../volumes/routes.js';
import { FIREWALL_PRESETS, INSTANCE_SORTS, USER_DATA_MAX_BYTES } from './rules.js';
import type { InstanceService } from './service.js';
import { INSTANCE_STATUSES } from './states.js';
import { InstanceView, SshEndpointView } from './view.js';

const InstanceTypeName = StringEnum(INSTANCE_TYPES.map((t) => t.name));

/** Where to SSH in; shared with the network view. */
export const SshEndpoint = SshEndpointView;

const Instance = InstanceView;

export const NewInstance = Type.Object(
  {
    name: ResourceName,
    instance_type: InstanceTypeName,
    region: StringEnum(REGION_NAMES),
    image: StringEnum(IMAGES.map((i) => i.name)),
    ssh_keys: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: 20,
        description: 'SSH key ids or names',
      }),
    ),
    tags: Type.Optional(Tags),
    user_data: Type.Optional(
      Type.String({ maxLength: USER_DATA_MAX_BYTES, description: 'Cloud-init user data, up to 16 KiB' }),
    ),
    encryption_key_id: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    firewall_preset: Type.Optional(StringEnum(FIREWALL_PRESETS, { default: 'ssh-only' })),
    monitoring: Type.Optional(Type.Boolean({ default: true })),
    backup_schedule: Type.Optional(BackupSchedule),
    public_ip: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          'false: no public IP (`public_ip: null`; reachable privately and through a VPN). true: one from the ' +
          'region’s pool, a public IP with `auto_delete: true`',
      }),
    ),
    protection: Type.Optional(Protection),
  },
  { title: 'NewInstance', additionalProperties: false },
);

const InstanceUpdate = Type.Object(
  {
    name: Type.Optional(ResourceName),
    tags: Type.Optional(Tags),
    monitoring: Type.Optional(Type.Boolean()),
    backup_schedule: Type.Optional(BackupSchedule),
    firewall_preset: Type.Optional(
      StringEnum(FIREWALL_PRESETS, {
        description: 'The implicit inbound rules below your own (docs/api.md, Firewall)',
      }),
    ),
    protection: Type.Optional(Protection),
  },
  { title: 'InstanceUpdate', additionalProperties: false, minProperties: 1 },
);

const StopRequest = Type.Union([
  Type.Object(
    {
      force: Type.Optional(
        Type.Boolean({
          description:
            'Power off at once, without a graceful shutdown: the way out of a stuck starting or stopping',
        }),
      ),
    },
    { title: 'InstanceStopRequest', additionalProperties: false },
  ),
  Type.Null(),
]);

const ResizeRequest = Type.Object(
  { instance_type: InstanceTypeName },
  { title: 'InstanceResizeRequest', additionalProperties: false },
);

const ListInstancesQuery = ListQuery(
  INSTANCE_SORTS,
  { sort: 'created_at' },
  {
    status: Type.Optional(StringEnum(INSTANCE_STATUSES)),
    region: Type.Optional(StringEnum(REGION_NAMES)),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    tag: Type.Optional(
      Type.Array(Type.String({ pattern: '^[^:]+:', maxLength: 400 }), {
        maxItems: 10,
        description: 'key:value; repeat to require several tags',
      }),
    ),
  },
);

export const instanceRoutes: FastifyPluginAsyncTypebox<{ instances: InstanceService }> = async (
  app,
  { instances },
) => {
  const route = resourceRoutes(app, {
    path: '/instances',
    tag: 'instances',
    permission: 'instances',
    view: Instance,
  });
  const accepted = 'Accepted: the instance in its new, transitional status';

  route.create({
    summary: 'Create instance (answers 202 with the instance starting; poll until running)',
    description:
      'Reserves the addresses and the root volume and boots the instance: the answer says `starting`; poll ' +
      '`GET /v1/instances/{id}` until `running`. Checks the type, region and image against the catalogue ' +
      '(GPU types only in GPU regions, with Ubuntu or CUDA images), the quotas (403 `quota_exceeded`) and the ' +
      "region's capacity (503 `insufficient_capacity`). A past-due account gets 402.",
    body: withExample(NewInstance, {
      name: 'web-1',
      instance_type: 'compute-2x',
      region: 'us-east-1',
      image: 'ubuntu-24.04',
      tags: { env: 'staging' },
      firewall_preset: 'web',
    }),
    status: 202,
    answer: accepted,
    errors: [402],
    viewOfMade: (accountId, made) => instances.get(accountId, made.id),
    run: ({ principal, body }) => instances.create(principal, body),
  });

  route.list({
    summary: 'List instances',
    description:
      'Newest first unless sorted otherwise; filters by status, region, exact name and tags (`tag=key:value`, ' +
      'repeated to require several) combine. `user_data` is left out of lists.',
    query: ListInstancesQuery,
    answer: 'One page of instances',
    run: ({ accountId, query }) => instances.list(accountId, query),
  });

  route.get({
    summary: 'Get instance',
    description: 'One instance with every field, `user_data` included; poll it to follow a change of status.',
    answer: 'The instance',
    errors: [404],
    run: ({ accountId, params }) => instances.get(accountId, params.id),
  });

  route.update({
    summary: 'Update instance (name, tags, monitoring, backup_schedule, firewall_preset, protection)',
    description:
      'Changes the given fields in any status but `deleting` (409 then); any other field is a 400. Removing ' +
      'the simulator fault tag lets a hung change finish.',
    body: InstanceUpdate,
    answer: 'The instance as changed',
    errors: [404, 409],
    run: ({ accountId, params, body }) => instances.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete instance (202, deleting; then 404)',
    description:
      'Powers the machine off and frees its addresses, root volume and quota; the answer says `deleting`, ' +
      'and the instance is 404 once it is gone. A 409 while `protection.delete` is on for the instance, its ' +
      'root volume or the public IP that would go with it (`auto_delete`).',
    status: 202,
    answer: accepted,
    errors: [404, 409],
    run: ({ accountId, params }) => instances.delete(accountId, params.id),
  });

  route.action('stop', {
    summary: 'Stop an instance; {"force": true} powers it off at once',
    description:
      'A graceful shutdown from `running` (answer `stopping`). With `{"force": true}` from `starting`, ' +
      '`running` or `stopping` it is immediate (answer `stopped`): the way out of a stuck instance. Other ' +
      'statuses are a 409 naming the allowed ones.',
    body: StopRequest,
    status: 202,
    answer: accepted,
    errors: [404, 409],
    run: ({ accountId, params, body }) =>
      instances.stop(accountId, params.id, { force: body?.force === true }),
  });

  route.action('start', {
    summary: 'Start a stopped instance',
    description:
      'Boots a `stopped` instance, or retries one in `error` (answer `starting`). A past-due account gets 402.',
    status: 202,
    answer: accepted,
    errors: [402, 404, 409],
    run: ({ principal, params }) => instances.start(principal, params.id),
  });

  route.action('restart', {
    summary: 'Restart a running instance',
    description: 'Goes `stopping`, then `starting`, then `running`; only from `running` (409 otherwise).',
    status: 202,
    answer: accepted,
    errors: [404, 409],
    run: ({ accountId, params }) => instances.restart(accountId, params.id),
  });

  route.action('resize', {
    summary: 'Change the instance type (a running instance restarts: 30–60 s of downtime)',
    description:
      'From `running`: stops, changes the type and boots again. From `stopped`: changes the type and stays ' +
      'stopped. The same type, or one with a smaller root disk, is a 400; more vCPUs or GPUs than the quota ' +
      'allows a 403.',
    body: ResizeRequest,
    status: 202,
    answer: accepted,
    errors: [404, 409],
    run: ({ principal, params, body }) => instances.resize(principal, params.id, body.instance_type),
  });
};
