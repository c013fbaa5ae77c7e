/**
 * Every failure leaves the server in the error envelope: domain errors with their code's status from the
 * error catalogue (platform/error-catalogue.ts), Fastify's own errors (validation, JSON, content type,
 * body size) translated to our codes, anything else as a 500 with no detail. Also answers unknown routes
 * (404) and known routes asked with the wrong method (405 with Allow).
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay from 'find-my-way';
import { PRINTABLE_NAME_PATTERN, PRINTABLE_NAME_RULE } from '../../domain/validation.js';
import { statusOf } from '../../error-catalogue.js';
import { DomainError, RateLimitExceeded } from '../../errors.js';
import { echoed, errorBody } from '../envelope.js';
import { lingerOnClose } from '../lingering-close.js';
import { violationPath } from '../validation.js';

/** Patterns whose meaning a sentence says better than the regular expression itself. */
const PATTERN_RULES = new Map([[PRINTABLE_NAME_PATTERN, PRINTABLE_NAME_RULE]]);

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

function valueAt(root: unknown, segments: string[]): unknown {
  let current = root;
  for (const segment of segments) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

/** Turns the first schema violation into `invalid_request` details that name the field. */
function validationDetails(request: FastifyRequest, error: FastifyError) {
  const first = (error.validation as AjvError[] | undefined)?.[0];
  const context = (error as { validationContext?: string }).validationContext ?? 'body';
  const source =
    context === 'querystring'
      ? request.query
      : context === 'params'
        ? request.params
        : context === 'headers'
          ? request.headers
          : request.body;
  if (!first) return { message: error.message, details: undefined };
  const segments = violationPath(first);
  const field = segments.join('.') || context;
  const details: Record<string, unknown> = { field, value: echoed(valueAt(source, segments) ?? null) };
  // The validator (validation.ts) puts the whole set of the field's schema here, where it has one.
  if (Array.isArray(first.params.allowedValues)) details.allowed_values = first.params.allowedValues;
  else if ('allowedValue' in first.params) details.allowed_values = [first.params.allowedValue];
  let message: string;
  if (first.keyword === 'required') message = `${field} is required`;
  else if (first.keyword === 'additionalProperties') message = `${field} is not a recognised field`;
  else if (first.keyword === 'pattern' && PATTERN_RULES.has(first.params.pattern as string))
    message = `${field} must be ${PATTERN_RULES.get(first.params.pattern as string)}`;
  else if (details.allowed_values)
    message = `${field} must be one of: ${(details.allowed_values as unknown[]).map(String).join(', ')}`;
  else message = `${field} ${first.message ?? 'is invalid'}`;
  return { message, details };
}

/** Sends the error envelope with its code's status (or, for a Fastify error passed through, Fastify's). */
function send(
  reply: FastifyReply,
  body: ReturnType<typeof errorBody>,
  status: number = statusOf(body.error.code),
) {
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

export function handleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const thrown: unknown = error;
  if (thrown instanceof DomainError) {
    if (thrown instanceof RateLimitExceeded) {
      reply.header('retry-after', String(thrown.retryAfterSeconds));
      return send(
        reply,
        errorBody(request, thrown.code, thrown.message, { retry_after: thrown.retryAfterSeconds }),
      );
    }
    return send(reply, errorBody(request, thrown.code, thrown.message, { details: thrown.details }));
  }
  if (error.validation) {
    const { message, details } = validationDetails(request, error);
    return send(reply, errorBody(request, 'invalid_request', message, { details }));
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      // The rest of the body is still on its way: close without a reset, or the client never sees this.
      lingerOnClose(request.raw.socket);
      return send(reply, errorBody(request, 'payload_too_large', 'The request body is larger than 1 MiB'));
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return send(
        reply,
        errorBody(
          request,
          'invalid_request',
          'Request bodies must be sent as Content-Type: application/json',
          {
            details: {
              field: 'Content-Type',
              value: request.headers['content-type'] ?? null,
              allowed_values: ['application/json'],
            },
          },
        ),
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return send(reply, errorBody(request, 'invalid_request', `Malformed JSON body: ${error.message}`));
  }
  if (error instanceof SyntaxError || (error.statusCode === 400 && error.code?.startsWith('FST_ERR_CTP'))) {
    return send(reply, errorBody(request, 'invalid_request', 'Malformed JSON body'));
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return send(reply, errorBody(request, 'invalid_request', error.message), error.statusCode);
  }
  request.log.error({ err: error }, 'unhandled error');
  return send(reply, errorBody(request, 'server_error', 'Internal server error'));
}

/**
 * The not-found handler: 405 with `Allow` when the path exists under another method, else 404.
 * Routes are mirrored into a router of our own because Fastify only matches by method.
 */
export function notFoundHandler(routes: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? request.url;
    const allowed = (['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const).filter(
      (method) => routes.find(method, path) !== null,
    );
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return send(
        reply,
        errorBody(
          request,
          'method_not_allowed',
          `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`,
          {
            details: { method: request.method, allowed_values: allowed },
          },
        ),
      );
    }
    return send(reply, errorBody(request, 'not_found', `No such endpoint: ${request.method} ${path}`));
  };
}

/** Registers the error handler and a route mirror for 405 detection; returns nothing, decorates `knownRoutes`. */
export const errorsPlugin = fp(
  async (app: FastifyInstance) => {
    const routes = FindMyWay({ ignoreTrailingSlash: true });
    const noop = () => {};
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      for (const method of methods) {
        if (!routes.hasRoute(method as FindMyWay.HTTPMethod, route.url))
          routes.on(method as FindMyWay.HTTPMethod, route.url, noop);
      }
    });
    app.decorate('knownRoutes', routes);
    app.setErrorHandler(handleError);
  },
  { name: 'nimbus-errors' },
);

declare module 'fastify' {
  interface FastifyInstance {
    knownRoutes: FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;
  }
}
