/**
 * The OpenAPI 3.1 document is generated from the route schemas (@fastify/swagger) and served at
 * /v1/openapi.json; /docs renders it with Swagger UI from local files (no CDN). The committed copy in
 * openapi/v1.json is checked against the generated one in CI (scripts/openapi.mjs), and every answer
 * the test suites receive is checked against it (test/helpers/openapi-contract.ts).
 *
 * Routes declare what is theirs: summary, description, success schema, the errors their service raises.
 * completeDocument() below adds what the shared plugins do on every route (responses.ts): their error
 * statuses, the response headers, the Idempotency-Key parameter; it keeps the tags and the description
 * of the API to the operations that exist; and it lists every shared part once under `components`, which
 * the operations of /v1 and /v2 point at (openapi-components.ts): a /v2 operation writes out only its
 * operationId, summary, description and tags, and a list's page where /v2 pages by cursor.
 */
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, RouteHandlerMethod } from 'fastify';
import type { StateTable } from '../lifecycle/state-table.js';
import { CachedDocument } from './document-cache.js';
import { errorResponse, type Reference, SharedComponents } from './openapi-components.js';
import { publishStateTables } from './openapi-states.js';
import { IDEMPOTENCY_KEY_PARAMETER, type OperationKind, pipelineErrors } from './responses.js';

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

/**
 * Every area the API has or will have, in the order the document lists them. Only the tags some
 * operation uses appear in the document; the others are named in its description as not served yet,
 * so the description stays true as resources land.
 */
export const TAGS: readonly { name: string; description: string; area: string }[] = [
  {
    name: 'instances',
    description: 'Virtual machines: create, list, update, start, stop, restart, resize, delete',
    area: 'instances',
  },
  {
    name: 'ssh-keys',
    description: 'SSH public keys installed for the login user of new instances',
    area: 'SSH keys',
  },
  { name: 'volumes', description: 'Block storage volumes', area: 'volumes' },
  { name: 'snapshots', description: 'Snapshots of volumes and instances', area: 'snapshots' },
  {
    name: 'networking',
    description: 'Network information of instances: addresses, DNS names, private network, firewall preset',
    area: 'network information',
  },
  { name: 'monitoring', description: 'Instance metrics and alerts', area: 'monitoring' },
  { name: 'billing', description: 'Usage, invoices and cost estimates', area: 'billing' },
  { name: 'webhooks', description: 'Event subscriptions with signed deliveries', area: 'webhooks' },
  {
    name: 'events',
    description: "The account's event log: every state change, newest first",
    area: 'events',
  },
  { name: 'account', description: 'Account, quotas, rate limits and API keys', area: 'the account' },
  { name: 'catalog', description: 'Instance types, regions and images', area: 'the catalogue' },
  { name: 'operations', description: 'Health and readiness (no key needed)', area: 'health checks' },
];

/**
 * The document changes only with a new release; five minutes of caching spare clients a download and
 * still let an upgrade show within minutes (a revalidation with If-None-Match costs a 304).
 */
export const DOCUMENT_CACHE_CONTROL = 'public, max-age=300';

export interface ApiDocuments {
  json: CachedDocument;
  yaml: CachedDocument;
}

/**
 * Registers the generator and Swagger UI, and returns the document as served: /v1/openapi.json and
 * Swagger UI's /docs/json and /docs/yaml all answer from the same copies in memory (document-cache.ts).
 * The state tables are published in it as `x-nimbus-states` (openapi-states.ts).
 */
export async function registerOpenApi(
  app: FastifyInstance,
  stateTables: readonly StateTable<string, string>[],
): Promise<ApiDocuments> {
  const documents: ApiDocuments = {
    json: new CachedDocument(() => JSON.stringify(app.swagger()), {
      contentType: 'application/json; charset=utf-8',
      cacheControl: DOCUMENT_CACHE_CONTROL,
    }),
    yaml: new CachedDocument(() => app.swagger({ yaml: true }), {
      contentType: 'application/x-yaml',
      cacheControl: DOCUMENT_CACHE_CONTROL,
    }),
  };
  // Swagger UI's own routes would serialise the whole document again on every request.
  const served: Record<string, RouteHandlerMethod> = {
    '/docs/json': (request, reply) => documents.json.send(request, reply),
    '/docs/yaml': (request, reply) => documents.yaml.send(request, reply),
  };
  app.addHook('onRoute', (route) => {
    const handler = served[route.url];
    if (handler) route.handler = handler;
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Nimbus Compute Platform API',
        version: '1.0.0',
        // Replaced by completeDocument() with the areas this server really serves.
        description: '',
        contact: { name: 'The operator of this Nimbus installation' },
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
    },
    // Shared schemas keep the name they were given ($id: Instance, ErrorEnvelope…) instead of def-N, so a
    // generated client's types are named after the resources.
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
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
      completeDocument(document as OpenApiDocument);
      publishStateTables(document, stateTables);
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
  return documents;
}

/**
 * `GET /v1/account/api-keys/:id` → `getAccountApiKeysById`: the method, then the path without its
 * version prefix, in camel case. /v1 keeps the unprefixed names it always had; a later version keeps its
 * prefix (`GET /v2/instances` → `getV2Instances`), so test/openapi.test.ts finds them unique.
 */
export function operationIdFor(method: string, url: string): string {
  const words = url
    .split('/')
    .filter((segment) => segment !== '' && segment !== 'v1')
    .flatMap((segment) =>
      segment.startsWith(':') ? ['by', segment.slice(1)] : segment.split(/[^A-Za-z0-9]+/),
    )
    .filter((word) => word !== '');
  const capitalised = words.map((word) => word[0]!.toUpperCase() + word.slice(1));
  return method.toLowerCase() + capitalised.join('');
}

interface Parameter {
  in?: string;
  name?: string;
  required?: boolean;
  schema?: Record<string, unknown>;
}

interface Operation {
  operationId?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: (Parameter | Reference)[];
  requestBody?: {
    required?: boolean;
    content?: Record<string, { schema?: { anyOf?: { type?: string }[] } }>;
  };
  responses?: Record<string, Record<string, unknown>>;
}

interface OpenApiDocument {
  info: { description?: string };
  tags?: { name: string; description: string }[];
  components?: Record<string, unknown>;
  paths?: Record<string, Record<string, Operation>>;
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

/** Adds what the shared plugins do on every operation of its kind (see responses.ts). */
function completeOperation(method: string, operation: Operation, components: SharedComponents): void {
  const kind: OperationKind = {
    method,
    public: Array.isArray(operation.security) && operation.security.length === 0,
  };
  // A query parameter with a default is filled in by the server: a client may leave it out.
  for (const parameter of operation.parameters ?? []) {
    if ('in' in parameter && parameter.in === 'query' && parameter.schema && 'default' in parameter.schema) {
      parameter.required = false;
    }
  }
  if (!kind.public && method === 'post') {
    const idempotencyKey = components.parameter(IDEMPOTENCY_KEY_PARAMETER.name, {
      ...IDEMPOTENCY_KEY_PARAMETER,
    });
    operation.parameters = [...(operation.parameters ?? []), idempotencyKey];
  }
  const responses = operation.responses ?? {};
  // Ranges say nothing a client can act on; each status is listed with what it means.
  delete responses['4XX'];
  delete responses['5XX'];
  for (const status of pipelineErrors(kind)) responses[status] ??= errorResponse(status);
  for (const [status, response] of Object.entries(responses)) {
    responses[status] = components.response(kind, Number(status), response);
  }
  operation.responses = Object.fromEntries(
    Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)),
  );
}

function listed(words: string[]): string {
  return words.length < 2 ? words.join('') : `${words.slice(0, -1).join(', ')} and ${words.at(-1)}`;
}

/** Tags and the API's description name exactly the areas some operation serves. */
function describeAreas(document: OpenApiDocument): void {
  const used = new Set(
    Object.values(document.paths ?? {}).flatMap((item) =>
      Object.values(item).flatMap((operation) => operation.tags ?? []),
    ),
  );
  document.tags = TAGS.filter((tag) => used.has(tag.name)).map(({ name, description }) => ({
    name,
    description,
  }));
  const served = TAGS.filter((tag) => used.has(tag.name)).map((tag) => tag.area);
  const planned = TAGS.filter((tag) => !used.has(tag.name)).map((tag) => tag.area);
  document.info.description =
    `The Nimbus compute-platform API. This server serves ${listed(served)}` +
    (planned.length > 0 ? `; ${listed(planned)} are not served yet.` : '.') +
    ' Every request needs HTTPS; every operation but the health checks needs an API key ' +
    '(`Authorization: Bearer <key>` or `X-API-Key: <key>`). Every answer is the JSON envelope: ' +
    '`{success, data, metadata}`, or `{success: false, error: {code, message, details}, metadata}`.';
}

function completeDocument(document: OpenApiDocument): void {
  const components = new SharedComponents();
  const operations: Operation[] = [];
  for (const item of Object.values(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      completeOperation(method, operation, components);
      operations.push(operation);
    }
  }
  components.shareNamedSchemas(document);
  components.shareParameters(operations);
  components.shareOperationParts(operations);
  document.components ??= {};
  components.writeInto(document.components);
  describeAreas(document);
}
