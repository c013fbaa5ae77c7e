/** The read-only catalogue: instance types, regions and images, paged like every other list. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  IMAGES,
  INSTANCE_TYPES,
  type InstanceFamily,
  REGION_NAMES,
  REGIONS,
  regionsOffering,
} from '../../domain/catalog.js';
import { microsToUsd } from '../../domain/money.js';
import { pageArray } from '../../domain/pagination.js';
import { okList } from '../envelope.js';
import { ListEnvelope, ListQuery, responses, StringEnum } from '../schemas.js';

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
        querystring: ListQuery(
          ['name', 'price_per_hour', 'vcpus', 'memory_gb'] as const,
          { sort: 'price_per_hour', order: 'asc' },
          {
            family: Type.Optional(StringEnum(FAMILIES)),
            region: Type.Optional(StringEnum(REGION_NAMES)),
          },
        ),
        response: responses({ 200: ListEnvelope(InstanceTypeSchema) }),
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
        querystring: ListQuery(['name'] as const, { sort: 'name', order: 'asc' }),
        response: responses({ 200: ListEnvelope(RegionSchema) }),
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
        querystring: ListQuery(['name'] as const, { sort: 'name', order: 'asc' }),
        response: responses({ 200: ListEnvelope(ImageSchema) }),
      },
    },
    async (request) => okList(request, pageArray(IMAGES, request.query)),
  );
};
