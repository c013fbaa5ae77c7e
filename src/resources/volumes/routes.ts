import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Protection } from '../../platform/domain/protection.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { ListQuery, ResourceName, StringEnum, Tags } from '../../platform/http/schemas.js';
import { REGION_NAMES } from '../catalog/catalog.js';
import { BACKUP_FREQUENCIES, BACKUP_RETENTION } from './backup-schedule.js';
import {
  FILESYSTEMS,
  MAX_DATA_VOLUMES_PER_INSTANCE,
  VOLUME_KINDS,
  VOLUME_SIZE_GB,
  VOLUME_SORTS,
} from './record.js';
import type { VolumeService } from './service.js';
import { VOLUME_STATUSES } from './states.js';
import { VolumeView } from './view.js';

const SizeGb = Type.Integer({
  minimum: VOLUME_SIZE_GB.min,
  maximum: VOLUME_SIZE_GB.max,
  description: `${VOLUME_SIZE_GB.min}–${VOLUME_SIZE_GB.max} GB`,
});
const InstanceId = Type.String({ minLength: 1, maxLength: 64, description: 'An instance of this account' });
/** A data volume's schedule, and an instance's for its root volume. */
export const BackupSchedule = Type.Union([
  Type.Object(
    {
      frequency: StringEnum(BACKUP_FREQUENCIES),
      retention: Type.Integer({ minimum: BACKUP_RETENTION.min, maximum: BACKUP_RETENTION.max }),
    },
    { title: 'BackupSchedule', additionalProperties: false },
  ),
  Type.Null(),
]);

export const Volume = VolumeView;

const NewVolume = Type.Object(
  {
    name: ResourceName,
    size_gb: SizeGb,
    region: StringEnum(REGION_NAMES),
    filesystem: Type.Optional(
      StringEnum(FILESYSTEMS, { description: 'Formatted with this on create; absent: raw' }),
    ),
    tags: Type.Optional(Tags),
    instance_id: Type.Optional({
      ...InstanceId,
      description: 'Attach to this instance (same region) once created',
    }),
    backup_schedule: Type.Optional(BackupSchedule),
    protection: Type.Optional(Protection),
  },
  { title: 'NewVolume', additionalProperties: false },
);

const VolumeUpdate = Type.Object(
  {
    name: Type.Optional(ResourceName),
    tags: Type.Optional(Tags),
    backup_schedule: Type.Optional(BackupSchedule),
    protection: Type.Optional(Protection),
  },
  { title: 'VolumeUpdate', additionalProperties: false, minProperties: 1 },
);

const AttachRequest = Type.Object(
  { instance_id: InstanceId },
  { title: 'VolumeAttachRequest', additionalProperties: false },
);
const ResizeRequest = Type.Object(
  { size_gb: { ...SizeGb, description: 'The new size: larger than the current one' } },
  { title: 'VolumeResizeRequest', additionalProperties: false },
);

const ListVolumesQuery = ListQuery(
  VOLUME_SORTS,
  { sort: 'created_at' },
  {
    status: Type.Optional(StringEnum(VOLUME_STATUSES)),
    region: Type.Optional(StringEnum(REGION_NAMES)),
    kind: Type.Optional(StringEnum(VOLUME_KINDS)),
    instance_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    tag: Type.Optional(
      Type.Array(Type.String({ pattern: '^[^:]+:', maxLength: 400 }), {
        maxItems: 10,
        description: 'key:value; repeat to require several tags',
      }),
    ),
  },
);

export const volumeRoutes: FastifyPluginAsyncTypebox<{ volumes: VolumeService }> = async (
  app,
  { volumes },
) => {
  const route = resourceRoutes(app, {
    path: '/volumes',
    tag: 'volumes',
    permission: 'volumes',
    view: Volume,
  });
  const accepted = 'Accepted: the volume in its new, transitional status';

  route.create({
    summary: 'Create volume (202 creating; poll until available, or in-use with instance_id)',
    description:
      'Allocates the disk (and formats it with `filesystem`): the answer says `creating`. With `instance_id` ' +
      'the volume attaches to that instance (same region, else 400) as soon as it is available; its device ' +
      `is chosen at once. Quotas \`volumes\` and \`volume_storage_gb\` (403); at most ${MAX_DATA_VOLUMES_PER_INSTANCE} ` +
      'data volumes per instance and an instance being deleted are 409; an instance of another account is 404; ' +
      'a past-due account gets 402.',
    body: withExample(NewVolume, {
      name: 'data-1',
      size_gb: 100,
      region: 'us-east-1',
      filesystem: 'ext4',
    }),
    status: 202,
    answer: accepted,
    errors: [402, 404],
    viewOfMade: (accountId, made) => volumes.get(accountId, made.id),
    run: ({ principal, body }) => volumes.create(principal, body),
  });

  route.list({
    summary: 'List volumes (data volumes and the root volumes of instances)',
    description:
      'Newest first unless sorted otherwise (`created_at`, `name`, `size_gb`); filters by status, region, kind ' +
      '(`data`, `root`), instance_id, exact name and tags (`tag=key:value`, repeated) combine.',
    query: ListVolumesQuery,
    answer: 'One page of volumes',
    run: ({ accountId, query }) => volumes.list(accountId, query),
  });

  route.get({
    summary: 'Get volume',
    description: 'One volume; poll it to follow a change of status.',
    answer: 'The volume',
    errors: [404],
    run: ({ accountId, params }) => volumes.get(accountId, params.id),
  });

  route.update({
    summary: 'Update volume (name, tags, backup_schedule, protection)',
    description:
      'Changes the name, tags or backup schedule (`{frequency: hourly|daily|weekly, retention: 1–90}` or null; ' +
      'data volumes only) in any status but `deleting` (409 then); any other field is a 400.',
    body: VolumeUpdate,
    answer: 'The volume as changed',
    errors: [404, 409],
    run: ({ accountId, params, body }) => volumes.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete volume (202, deleting; then 404)',
    description:
      'From `available` or `error`. A volume on an instance is a 409 naming the instance (detach it first); ' +
      'a root volume is a 409 (it goes with its instance); so is a volume with `protection.delete` on.',
    status: 202,
    answer: accepted,
    errors: [404, 409],
    run: ({ accountId, params }) => volumes.delete(accountId, params.id),
  });

  route.action('attach', {
    summary: 'Attach to an instance (202 attaching; then in-use)',
    description:
      'From `available`, to an instance of the same region (else 400 naming both regions) that is not being ' +
      'deleted (409). The device (`/dev/vdb`…) is the lowest free one and is kept while attached; at most ' +
      `${MAX_DATA_VOLUMES_PER_INSTANCE} data volumes per instance (409). A volume attached or attaching elsewhere is ` +
      'a 409 naming that instance; an instance of another account is 404 (`details.field: instance_id`).',
    body: withExample(AttachRequest, { instance_id: 'ins_01JD3Q5W4R8Z2M0000000000AB' }),
    status: 202,
    answer: accepted,
    errors: [404],
    run: ({ accountId, params, body }) => volumes.attach(accountId, params.id, body.instance_id),
  });

  route.action('detach', {
    summary: 'Detach from its instance (202 detaching; then available)',
    description:
      'From `in-use` (or `error` while on an instance). A root volume cannot be detached (409); its device is ' +
      'free for the next attach once detached.',
    status: 202,
    answer: accepted,
    errors: [404],
    run: ({ accountId, params }) => volumes.detach(accountId, params.id),
  });

  route.action('resize', {
    summary: 'Grow a volume (202 resizing; attached volumes grow online)',
    description:
      'From `available` or `in-use`; back there when done. A size not larger than the current one is a 400; ' +
      'the growth counts against `volume_storage_gb` (403). A root volume is a 409: resize its instance.',
    body: withExample(ResizeRequest, { size_gb: 200 }),
    status: 202,
    answer: accepted,
    errors: [404],
    run: ({ accountId, params, body }) => volumes.resize(accountId, params.id, body.size_gb),
  });
};
