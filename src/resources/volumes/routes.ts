import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ok, okList } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses, withExample } from '../../platform/http/responses.js';
import {
  Envelope,
  IdParams,
  ListEnvelope,
  ListQuery,
  ResourceName,
  StringEnum,
  Tags,
} from '../../platform/http/schemas.js';
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
  },
  { title: 'NewVolume', additionalProperties: false },
);

const VolumeUpdate = Type.Object(
  {
    name: Type.Optional(ResourceName),
    tags: Type.Optional(Tags),
    backup_schedule: Type.Optional(BackupSchedule),
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
  const accepted = described(Envelope(Volume), 'Accepted: the volume in its new, transitional status');
  const write = { permission: ['volumes', 'write'] } as const;
  const read = { permission: ['volumes', 'read'] } as const;
  const tags = ['volumes'];

  app.post(
    '/volumes',
    {
      schema: {
        tags,
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
        response: { 202: accepted, ...errorResponses(402, 404) },
      },
      config: {
        ...write,
        idempotentCreate: { status: 202, view: (accountId, made) => volumes.get(accountId, made.id) },
      },
    },
    async (request, reply) =>
      reply.code(202).send(ok(request, await volumes.create(principalOf(request), request.body))),
  );

  app.get(
    '/volumes',
    {
      schema: {
        tags,
        summary: 'List volumes (data volumes and the root volumes of instances)',
        description:
          'Newest first unless sorted otherwise (`created_at`, `name`, `size_gb`); filters by status, region, kind ' +
          '(`data`, `root`), instance_id, exact name and tags (`tag=key:value`, repeated) combine.',
        querystring: ListVolumesQuery,
        response: { 200: described(ListEnvelope(Volume), 'One page of volumes') },
      },
      config: read,
    },
    async (request) => okList(request, await volumes.list(principalOf(request).accountId, request.query)),
  );

  app.get(
    '/volumes/:id',
    {
      schema: {
        tags,
        summary: 'Get volume',
        description: 'One volume; poll it to follow a change of status.',
        params: IdParams,
        response: { 200: described(Envelope(Volume), 'The volume'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request) => ok(request, await volumes.get(principalOf(request).accountId, request.params.id)),
  );

  app.patch(
    '/volumes/:id',
    {
      schema: {
        tags,
        summary: 'Update volume (name, tags, backup_schedule)',
        description:
          'Changes the name, tags or backup schedule (`{frequency: hourly|daily|weekly, retention: 1–90}` or null; ' +
          'data volumes only) in any status but `deleting` (409 then); any other field is a 400.',
        params: IdParams,
        body: VolumeUpdate,
        response: { 200: described(Envelope(Volume), 'The volume as changed'), ...errorResponses(404, 409) },
      },
      config: write,
    },
    async (request) =>
      ok(request, await volumes.update(principalOf(request).accountId, request.params.id, request.body)),
  );

  app.delete(
    '/volumes/:id',
    {
      schema: {
        tags,
        summary: 'Delete volume (202, deleting; then 404)',
        description:
          'From `available` or `error`. A volume on an instance is a 409 naming the instance (detach it first); ' +
          'a root volume is a 409 (it goes with its instance).',
        params: IdParams,
        response: { 202: accepted, ...errorResponses(404, 409) },
      },
      config: write,
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(ok(request, await volumes.delete(principalOf(request).accountId, request.params.id))),
  );

  app.post(
    '/volumes/:id/attach',
    {
      schema: {
        tags,
        summary: 'Attach to an instance (202 attaching; then in-use)',
        description:
          'From `available`, to an instance of the same region (else 400 naming both regions) that is not being ' +
          'deleted (409). The device (`/dev/vdb`…) is the lowest free one and is kept while attached; at most ' +
          `${MAX_DATA_VOLUMES_PER_INSTANCE} data volumes per instance (409). A volume attached or attaching elsewhere is ` +
          'a 409 naming that instance; an instance of another account is 404 (`details.field: instance_id`).',
        params: IdParams,
        body: withExample(AttachRequest, { instance_id: 'ins_01JD3Q5W4R8Z2M0000000000AB' }),
        response: { 202: accepted, ...errorResponses(404) },
      },
      config: write,
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(
          ok(
            request,
            await volumes.attach(principalOf(request).accountId, request.params.id, request.body.instance_id),
          ),
        ),
  );

  app.post(
    '/volumes/:id/detach',
    {
      schema: {
        tags,
        summary: 'Detach from its instance (202 detaching; then available)',
        description:
          'From `in-use` (or `error` while on an instance). A root volume cannot be detached (409); its device is ' +
          'free for the next attach once detached.',
        params: IdParams,
        response: { 202: accepted, ...errorResponses(404) },
      },
      config: write,
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(ok(request, await volumes.detach(principalOf(request).accountId, request.params.id))),
  );

  app.post(
    '/volumes/:id/resize',
    {
      schema: {
        tags,
        summary: 'Grow a volume (202 resizing; attached volumes grow online)',
        description:
          'From `available` or `in-use`; back there when done. A size not larger than the current one is a 400; ' +
          'the growth counts against `volume_storage_gb` (403). A root volume is a 409: resize its instance.',
        params: IdParams,
        body: withExample(ResizeRequest, { size_gb: 200 }),
        response: { 202: accepted, ...errorResponses(404) },
      },
      config: write,
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(
          ok(
            request,
            await volumes.resize(principalOf(request).accountId, request.params.id, request.body.size_gb),
          ),
        ),
  );
};
