import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { ListQuery, Nullable, ResourceName, StringEnum, Tags } from '../../platform/http/schemas.js';
import { requirePermission } from '../../platform/principal.js';
import { REGION_NAMES } from '../catalog/catalog.js';
import { NewInstance } from '../instances/routes.js';
import { VOLUME_SIZE_GB } from '../volumes/record.js';
import { Volume } from '../volumes/routes.js';
import { SNAPSHOT_KINDS, SNAPSHOT_SORTS } from './record.js';
import type { SnapshotService } from './service.js';
import { SNAPSHOT_STATUSES } from './states.js';
import { SnapshotView } from './view.js';

const ResourceId = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });

export const Snapshot = SnapshotView;

const NewSnapshot = Type.Object(
  {
    name: ResourceName,
    volume_id: Type.Optional(ResourceId('The volume to copy (a data volume or a root volume)')),
    instance_id: Type.Optional(ResourceId('Copy the root volume of this instance (running or stopped)')),
    tags: Type.Optional(Tags),
  },
  { title: 'NewSnapshot', additionalProperties: false },
);

const SnapshotUpdate = Type.Object(
  { name: Type.Optional(ResourceName), tags: Type.Optional(Tags) },
  { title: 'SnapshotUpdate', additionalProperties: false, minProperties: 1 },
);

const RestoreRequest = Type.Object(
  {
    name: Type.Optional({ ...ResourceName, description: "A new volume: its name (default: the snapshot's)" }),
    size_gb: Type.Optional(
      Type.Integer({
        minimum: VOLUME_SIZE_GB.min,
        maximum: VOLUME_SIZE_GB.max,
        description: "A new volume: its size, at least the snapshot's (default: the snapshot's)",
      }),
    ),
    region: Type.Optional(
      StringEnum(REGION_NAMES, { description: "A new volume: must be the snapshot's region (the default)" }),
    ),
    tags: Type.Optional({ ...Tags, description: 'A new volume: its tags' }),
    target_volume_id: Type.Optional(
      ResourceId('Write over this detached data volume (same region, at least as large)'),
    ),
    instance_id: Type.Optional(
      ResourceId('Root snapshots: write over the root disk of this stopped instance (same region)'),
    ),
    instance: Type.Optional(
      Type.Composite(
        [
          Type.Omit(NewInstance, ['region', 'image']),
          Type.Partial(Type.Pick(NewInstance, ['region', 'image'])),
        ],
        {
          additionalProperties: false,
          description:
            "Root snapshots: a new instance booted from it (the instance create body; `region` is the snapshot's, " +
            "`image` defaults to the source instance's); its type's disk must hold the snapshot",
        },
      ),
    ),
  },
  { title: 'SnapshotRestoreRequest', additionalProperties: false },
);

const Restore = Type.Object(
  {
    snapshot: Snapshot,
    volume: Volume,
    instance_id: Nullable(
      Type.String({
        description:
          'The instance whose root disk is being restored (a new one for `instance`); null for data volumes',
      }),
    ),
  },
  { title: 'SnapshotRestore' },
);

const ListSnapshotsQuery = ListQuery(
  SNAPSHOT_SORTS,
  { sort: 'created_at' },
  {
    status: Type.Optional(StringEnum(SNAPSHOT_STATUSES)),
    kind: Type.Optional(StringEnum(SNAPSHOT_KINDS)),
    source_volume_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    source_instance_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    region: Type.Optional(StringEnum(REGION_NAMES)),
  },
);

export const snapshotRoutes: FastifyPluginAsyncTypebox<{ snapshots: SnapshotService }> = async (
  app,
  { snapshots },
) => {
  const route = resourceRoutes(app, {
    path: '/snapshots',
    tag: 'snapshots',
    permission: 'snapshots',
    view: Snapshot,
  });

  route.create({
    summary: 'Create snapshot (202 creating; then available or failed)',
    description:
      'Copies a volume (`volume_id`, data or root) or the root volume of an instance (`instance_id`, running ' +
      'or stopped); name exactly one. The source must be `available` or `in-use` (409 otherwise). Quota ' +
      '`snapshots` (403); a past-due account gets 402; a source of another account is 404 naming the field. ' +
      'The snapshot outlives its source.',
    body: withExample(NewSnapshot, {
      name: 'data-1-before-upgrade',
      volume_id: 'vol_01jd3q5w4r8z2m0000000000ab',
    }),
    status: 202,
    answer: 'Accepted: the snapshot, creating',
    errors: [402, 404, 409],
    viewOfMade: (accountId, made) => snapshots.get(accountId, made.id),
    run: ({ principal, body }) => snapshots.create(principal, body),
  });

  route.list({
    summary: 'List snapshots',
    description:
      'Newest first unless sorted otherwise (`created_at`, `name`, `size_gb`); filters by status, kind, ' +
      'source_volume_id, source_instance_id and region combine.',
    query: ListSnapshotsQuery,
    answer: 'One page of snapshots',
    run: ({ accountId, query }) => snapshots.list(accountId, query),
  });

  route.get({
    summary: 'Get snapshot',
    description: 'One snapshot; poll it to follow `creating` to `available` or `failed`.',
    answer: 'The snapshot',
    errors: [404],
    run: ({ accountId, params }) => snapshots.get(accountId, params.id),
  });

  route.update({
    summary: 'Update snapshot (name, tags)',
    description: 'In any status but `deleting` (409 then); any other field is a 400.',
    body: SnapshotUpdate,
    answer: 'The snapshot as changed',
    errors: [404, 409],
    run: ({ accountId, params, body }) => snapshots.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Delete snapshot (202 deleting; then 404)',
    description:
      'From `available` or `failed`; a snapshot still being made, or being restored from, is a 409.',
    status: 202,
    answer: 'Accepted: the snapshot, deleting',
    errors: [404, 409],
    run: ({ accountId, params }) => snapshots.delete(accountId, params.id),
  });

  route.action('restore', {
    summary: 'Restore snapshot (202; into a new volume, over a detached volume, or over a root disk)',
    description:
      "The snapshot must be `available` (409). Say what to write: a new volume (`name`, default the snapshot's; " +
      "`size_gb` at least the snapshot's, the snapshot's region; quotas `volumes` and `volume_storage_gb`), `target_volume_id` (a " +
      'detached data volume of the same region and at least its size; attached is 409), or `instance_id` ' +
      '(root snapshots only: the root disk of a stopped instance, else 409), or `instance` (root snapshots only: a ' +
      'new instance, created `starting` with the instance quotas and rules, booting once its root disk is ' +
      "restored). No body (or one naming none of these): a data volume's snapshot becomes a new volume named " +
      "after it, of its size and region; a root snapshot is written over its source instance's disk when that " +
      'instance is stopped (else 400). Besides `snapshots:write` the key needs `volumes:write` for a volume ' +
      '(new or written over) and `instances:write` for an instance (new or its root disk), else 403. ' +
      'The volume written is `creating` ' +
      'or `restoring` until done; then `snapshot.restored` is written. A volume or instance of another account ' +
      'is 404 naming the field.',
    // No body at all is a request too: the restore the snapshot is for.
    body: Type.Union([withExample(RestoreRequest, { name: 'data-1-restored', size_gb: 200 }), Type.Null()]),
    status: 202,
    returns: Restore,
    answer: 'Accepted: the snapshot and the volume being written',
    errors: [402, 404, 409],
    viewOfMade: (accountId, made, params) => snapshots.restoredView(accountId, params.id ?? '', made),
    config: {
      // A replay answers only a key that could have made the restore: what it wrote names an instance
      // (a new one, or a root disk written back) or only a volume (RESTORE_PERMISSIONS).
      idempotentReplayCheck: (principal, data) =>
        requirePermission(principal, data.instance_id ? 'instances' : 'volumes', 'write'),
    },
    run: ({ principal, params, body }) => snapshots.restore(principal, params.id, body ?? {}),
  });
};
