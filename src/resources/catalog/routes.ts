/** The read-only catalogue: instance types, regions and images, paged like every other list. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { microsToUsd } from '../../platform/domain/money.js';
import { pageArray } from '../../platform/domain/pagination.js';
import { okList } from '../../platform/http/envelope.js';
import { described } from '../../platform/http/responses.js';
import { ListEnvelope, ListQuery, StringEnum } from '../../platform/http/schemas.js';
import {
  IMAGES,
  INSTANCE_TYPES,
  type InstanceFamily,
  REGION_NAMES,
  REGIONS,
  regionsOffering,
} from './catalog.js';

const FAMILIES: readonly InstanceFamily[] = ['compute', 'memory', 'storage', 'gpu'];

const InstanceTypeSchema = Type.Object(
  {
    name: Type.String(),
    family: StringEnum(FAMILIES),
    vcpus: Type.Integer(),
    memory_gb: Type.Integer(),
    storage_gb: Type.Integer(),
    iops: Type.Union([Type.Integer(), Type.Null()]),
    gpu: Type.Union([
      Type.Object({ count: Type.Integer(), model: Type.String(), memory_gb: Type.Integer() }),
      Type.Null(),
    ]),
    price_per_hour: Type.Number({ description: 'USD per hour while running' }),
    regions: Type.Array(Type.String(), { description: 'Regions that offer this type' }),
  },
  { title: 'InstanceType' },
);

const RegionSchema = Type.Object(
  { name: Type.String(), description: Type.String(), gpu_available: Type.Boolean() },
  { title: 'Region' },
);

const ImageSchema = Type.Object(
  {
    name: Type.String(),
    description: Type.String(),
    distribution: Type.String(),
    version: Type.String(),
    gpu_compatible: Type.Boolean(),
  },
  { title: 'Image' },
);

const instanceTypes = INSTANCE_TYPES.map((t) => ({
  name: t.name,
  family: t.family,
  vcpus: t.vcpus,
  memory_gb: t.memory_gb,
  storage_gb: t.storage_gb,
  iops: t.iops,
  gpu: t.gpu,
  price_per_hour: microsToUsd(t.price_per_hour_micros),
  regions: regionsOffering(t),
}));

export const catalogRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/instance-types',
    {
      schema: {
        tags: ['catalog'],
        summary: 'List instance types with their specifications and hourly prices',
        description:
          'Every instance type, cheapest first unless sorted otherwise, with the regions that offer it. ' +
          'GPU types are offered only in us-east-1 and us-west-2.',
        querystring: ListQuery(
          ['name', 'price_per_hour', 'vcpus', 'memory_gb'] as const,
          { sort: 'price_per_hour', order: 'asc' },
          {
            family: Type.Optional(StringEnum(FAMILIES)),
            region: Type.Optional(StringEnum(REGION_NAMES)),
          },
        ),
        response: { 200: described(ListEnvelope(InstanceTypeSchema), 'One page of instance types') },
      },
    },
    async (request) => {
      const { family, region } = request.query;
      return okList(
        request,
        pageArray(
          instanceTypes,
          request.query,
          (t) =>
            (family === undefined || t.family === family) &&
            (region === undefined || t.regions.includes(region)),
        ),
      );
    },
  );

  app.get(
    '/regions',
    {
      schema: {
        tags: ['catalog'],
        summary: 'List regions',
        description: 'The regions instances can be created in, and whether each offers GPU types.',
        querystring: ListQuery(['name'] as const, { sort: 'name', order: 'asc' }),
        response: { 200: described(ListEnvelope(RegionSchema), 'One page of regions') },
      },
    },
    async (request) => okList(request, pageArray(REGIONS, request.query)),
  );

  app.get(
    '/images',
    {
      schema: {
        tags: ['catalog'],
        summary: 'List OS images',
        description: 'The operating-system images instances boot from, and which of them GPU types accept.',
        querystring: ListQuery(['name'] as const, { sort: 'name', order: 'asc' }),
        response: { 200: described(ListEnvelope(ImageSchema), 'One page of images') },
      },
    },
    async (request) => okList(request, pageArray(IMAGES, request.query)),
  );
};
