import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { Protection } from '../../platform/domain/protection.js';
import { resourceRoutes } from '../../platform/http/resource-routes.js';
import { withExample } from '../../platform/http/responses.js';
import { ListQuery, ResourceName, StringEnum, Tags } from '../../platform/http/schemas.js';
import { REGION_NAMES } from '../catalog/catalog.js';
import { PUBLIC_IP_SORTS } from './record.js';
import type { PublicIpService } from './service.js';
import { PublicIpView } from './view.js';

const InstanceId = Type.String({ minLength: 1, maxLength: 64, description: 'An instance of this account' });

const NewPublicIp = Type.Object(
  {
    region: StringEnum(REGION_NAMES),
    name: Type.Optional({ ...ResourceName, description: 'Default: `ip-` and the address' }),
    tags: Type.Optional(Tags),
    protection: Type.Optional(Protection),
  },
  { title: 'NewPublicIp', additionalProperties: false },
);

const PublicIpUpdate = Type.Object(
  {
    name: Type.Optional(ResourceName),
    tags: Type.Optional(Tags),
    auto_delete: Type.Optional(
      Type.Boolean({
        description: 'false: keep the address when its instance is deleted (counts in the quota)',
      }),
    ),
    protection: Type.Optional(Protection),
  },
  { title: 'PublicIpUpdate', additionalProperties: false, minProperties: 1 },
);

const AssignRequest = Type.Object(
  { instance_id: InstanceId },
  { title: 'PublicIpAssignRequest', additionalProperties: false },
);

const ListPublicIpsQuery = ListQuery(
  PUBLIC_IP_SORTS,
  { sort: 'created_at' },
  {
    region: Type.Optional(StringEnum(REGION_NAMES)),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    instance_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    assigned: Type.Optional(
      Type.Boolean({ description: 'true: assigned to an instance; false: unassigned' }),
    ),
  },
);

export const publicIpRoutes: FastifyPluginAsyncTypebox<{ publicIps: PublicIpService }> = async (
  app,
  { publicIps },
) => {
  const route = resourceRoutes(app, {
    path: '/public-ips',
    tag: 'networking',
    permission: 'networking',
    view: PublicIpView,
  });

  route.create({
    summary: 'Allocate a public IP (201)',
    description:
      'An address from the region’s pool, kept until released; billed while unassigned (`public_ip_idle`, ' +
      '0.005 USD/h). Quota `public_ips` counts addresses with `auto_delete: false` (403); no address left: 503.',
    body: withExample(NewPublicIp, { region: 'us-east-1', name: 'web-frontend' }),
    status: 201,
    answer: 'The public IP allocated',
    errors: [402, 503],
    viewOfMade: (accountId, made) => publicIps.get(accountId, made.id),
    run: ({ principal, body }) => publicIps.allocate(principal, body),
  });

  route.list({
    summary: 'List public IPs',
    description: 'Newest first unless sorted otherwise; the filters combine.',
    query: ListPublicIpsQuery,
    answer: 'One page of public IPs',
    run: ({ accountId, query }) => publicIps.list(accountId, query),
  });

  route.get({
    summary: 'Get public IP',
    description: 'One public IP.',
    answer: 'The public IP',
    errors: [404],
    run: ({ accountId, params }) => publicIps.get(accountId, params.id),
  });

  route.update({
    summary: 'Update public IP (name, tags, auto_delete, protection)',
    description:
      '`auto_delete: false` keeps an instance’s address when the instance is deleted (quota `public_ips`, 403).',
    body: PublicIpUpdate,
    answer: 'The public IP as changed',
    errors: [404, 409],
    run: ({ accountId, params, body }) => publicIps.update(accountId, params.id, body),
  });

  route.delete({
    summary: 'Release public IP',
    description: 'Returns to the pool 24 h later. 409 while assigned or while `protection.delete` is on.',
    answer: 'The public IP released',
    errors: [404, 409],
    run: ({ accountId, params }) => publicIps.release(accountId, params.id),
  });

  route.action('assign', {
    summary: 'Assign to an instance',
    description:
      'To an instance of this account (else 404) and region (else 400) that has no public IP and is not ' +
      'being deleted (409); 409 while assigned elsewhere. The instance’s `public_ip` follows at once.',
    body: withExample(AssignRequest, { instance_id: 'ins_01JD3Q5W4R8Z2M0000000000AB' }),
    answer: 'The public IP, assigned',
    errors: [404, 409],
    run: ({ accountId, params, body }) => publicIps.assign(accountId, params.id, body.instance_id),
  });

  route.action('unassign', {
    summary: 'Unassign from its instance',
    description: 'The instance is left with `public_ip: null`; the account keeps the address.',
    answer: 'The public IP, unassigned',
    errors: [404, 409],
    run: ({ accountId, params }) => publicIps.unassign(accountId, params.id),
  });
};
