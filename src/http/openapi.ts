/**
 * The OpenAPI 3.1 document is generated from the route schemas (@fastify/swagger) and served at
 * /v1/openapi.json; /docs renders it with Swagger UI from local files (no CDN). The committed copy in
 * openapi/v1.json is checked against the generated one in CI (scripts/openapi.mjs).
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/** Content-Security-Policy of the /docs pages: everything from this server, nothing from elsewhere. */
export const DOCS_CSP = [
  "default-src 'self'",
  "base-uri 'self'",
  "font-src 'self' data:",
  "frame-ancestors 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "script-src 'self'",
  "script-src-attr 'none'",
  "style-src 'self'",
  'upgrade-insecure-requests',
].join('; ');

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
    // Public routes need no key: say so in the document. Every operation gets an operationId (for
    // generated clients) unless its route names one.
    transform: ({ schema, url, route }) => {
      const transformed = { schema: { ...schema } as Record<string, unknown>, url };
      if (route.config && (route.config as { public?: boolean }).public) transformed.schema.security = [];
      if (transformed.schema.operationId === undefined && typeof route.method === 'string') {
        transformed.schema.operationId = operationIdFor(route.method, url);
      }
      return transformed;
    },
    transformObject: (documents) => {
      const document = 'openapiObject' in documents ? documents.openapiObject : documents.swaggerObject;
      markOptionalBodies(document as OpenApiDocument);
      return document;
    },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { validatorUrl: null, deepLinking: true },
    // The package's default policy still admits https: fonts and styles and the public validator's
    // images; the page needs nothing from another host, so allow none.
    staticCSP: DOCS_CSP,
  });
}

/**
 * `GET /v1/account/api-keys/:id` → `getAccountApiKeysById`: the method, then the path without its
 * version prefix, in camel case. test/openapi.test.ts checks they stay unique (a /v2 would need its own).
 */
export function operationIdFor(method: string, url: string): string {
  const words = url
    .split('/')
    .filter((segment) => segment !== '' && !/^v\d+$/.test(segment))
    .flatMap((segment) =>
      segment.startsWith(':') ? ['by', segment.slice(1)] : segment.split(/[^A-Za-z0-9]+/),
    )
    .filter((word) => word !== '');
  const capitalised = words.map((word) => word[0]!.toUpperCase() + word.slice(1));
  return method.toLowerCase() + capitalised.join('');
}

interface OpenApiDocument {
  paths?: Record<
    string,
    Record<
      string,
      {
        requestBody?: {
          required?: boolean;
          content?: Record<string, { schema?: { anyOf?: { type?: string }[] } }>;
        };
      }
    >
  >;
}

/**
 * @fastify/swagger marks every request body required. A body whose schema also admits null (the stop
 * action's `{"force": true}`) may be left out, so the document says so and generated clients do not
 * insist on sending one.
 */
function markOptionalBodies(document: OpenApiDocument): void {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      const body = operation.requestBody;
      const schema = body?.content?.['application/json']?.schema;
      if (body && schema?.anyOf?.some((option) => option.type === 'null')) body.required = false;
    }
  }
}
