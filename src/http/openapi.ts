/**
 * The OpenAPI 3.1 document is generated from the route schemas (@fastify/swagger) and served at
 * /v1/openapi.json; /docs renders it with Swagger UI from local files (no CDN). The committed copy in
 * openapi/v1.json is checked against the generated one in CI (scripts/openapi.mjs).
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Nimbus Compute Platform API',
        version: '1.0.0',
        description:
          'Instances, volumes, snapshots, networking, monitoring, billing, account and webhooks. ' +
          'Every request needs HTTPS and an API key (Authorization: Bearer <key> or X-API-Key).',
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      },
      servers: [{ url: '/', description: 'This Nimbus server' }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API key>' },
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        },
      },
      security: [{ bearer: [] }, { apiKey: [] }],
      tags: [
        { name: 'account', description: 'Account, quotas, rate limits and API keys' },
        { name: 'catalog', description: 'Instance types, regions and images' },
        { name: 'operations', description: 'Health and readiness (no key needed)' },
      ],
    },
    // Public routes need no key: say so in the document.
    transform: ({ schema, url, route }) => {
      const transformed = { schema: { ...schema } as Record<string, unknown>, url };
      if (route.config && (route.config as { public?: boolean }).public) transformed.schema.security = [];
      return transformed;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { validatorUrl: null, deepLinking: true },
    staticCSP: true,
  });
}
