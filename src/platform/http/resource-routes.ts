/**
 * A resource's REST routes as declarations: each says its summary, description, request schemas, answer
 * and errors, and the one service call it makes; the route around it is the same everywhere, so it is
 * written here once (docs/architecture.md, "A request").
 *
 *   const route = resourceRoutes(app, { path: '/volumes', tag: 'volumes', permission: 'volumes', view: Volume });
 *   route.get({
 *     summary: 'Get volume',
 *     description: 'One volume; poll it to follow a change of status.',
 *     answer: 'The volume',
 *     errors: [404],
 *     run: ({ accountId, params }) => volumes.get(accountId, params.id),
 *   });
 *
 * What every route gets: the resource's tag; its permission area, `read` on GET and `write` otherwise
 * (plugins/guard.ts); `IdParams` on the paths under `/:id` unless it declares others; its answer in the
 * envelope (envelope.ts), as one `Envelope` or a `ListEnvelope` page of the resource's view (or of what it
 * `returns`), described for the document; the error answers of its own service (the shared plugins' are
 * added by openapi.ts); and, on a route that makes something, the idempotency plugin's view of what it
 * made (`viewOfMade`), answered with the route's own status.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Static, TSchema, TUnknown } from '@sinclair/typebox';
import type {
  FastifyBaseLogger,
  FastifyContextConfig,
  FastifyInstance,
  FastifySchema,
  HTTPMethods,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Page } from '../domain/pagination.js';
import type { Access, PermissionArea } from '../domain/permissions.js';
import type { Principal } from '../principal.js';
import { ok, okList } from './envelope.js';
import { principalOf } from './plugins/guard.js';
import { described, type ErrorStatus, errorResponses } from './responses.js';
import { Envelope, IdParams, ListEnvelope } from './schemas.js';

/** The Fastify instance a resource's route plugin is given (FastifyPluginAsyncTypebox). */
export type ApiInstance = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** What a route's service call is given: the caller, and the request's parts as its schemas validated them. */
export interface RouteCall<P extends TSchema, Q extends TSchema, B extends TSchema> {
  principal: Principal;
  accountId: string;
  params: Static<P>;
  query: Static<Q>;
  body: Static<B>;
}

type IdempotentCreate = NonNullable<FastifyContextConfig['idempotentCreate']>;

interface RouteDeclaration<P extends TSchema, Q extends TSchema, B extends TSchema> {
  /**
   * The record the route is about (for a list or a create: the collection), under the resource's path,
   * when it is not the usual one: a VPN's peer is `/:id/peers/:peer_id`, and its peers `/:id/peers`.
   */
  path?: string;
  summary: string;
  description: string;
  params?: P;
  query?: Q;
  body?: B;
  /** 200 unless said: 201 for what is made at once, 202 for a change that goes on after the answer. */
  status?: 200 | 201 | 202;
  /** The sentence the document gives the success answer. */
  answer: string;
  /** The error statuses the route's own service answers with. */
  errors?: ErrorStatus[];
  /** The route makes something: how to show what it made to a retry that finds it made but never answered. */
  viewOfMade?: IdempotentCreate['view'];
  /** Where a replayed answer must differ from the first: secrets shown once, a replay's own permission check. */
  config?: Pick<FastifyContextConfig, 'idempotencyOmit' | 'carriesSecret' | 'idempotentReplayCheck'>;
}

/** A route answering one thing: the resource's view unless it `returns` another schema. */
export interface OneRoute<P extends TSchema, Q extends TSchema, B extends TSchema, D extends TSchema>
  extends RouteDeclaration<P, Q, B> {
  returns?: D;
  run: (call: RouteCall<P, Q, B>) => Promise<NoInfer<Static<D>>>;
}

/** A route answering one page of a list: of the resource's view unless it `returns` another item schema. */
export interface ListRoute<P extends TSchema, Q extends TSchema, D extends TSchema>
  extends RouteDeclaration<P, Q, TUnknown> {
  returns?: D;
  run: (call: RouteCall<P, Q, TUnknown>) => Promise<Page<NoInfer<Static<D>>>>;
}

export interface ResourceRouteOptions<V extends TSchema> {
  /** The collection's path (`/volumes`); each record is at `<path>/:id`. */
  path: string;
  /** The document's tag of every route. */
  tag: string;
  /** The permission area every route requires. */
  permission: PermissionArea;
  /** What the routes answer with, unless one `returns` something else. */
  view: V;
}

type AnyDeclaration = RouteDeclaration<TSchema, TSchema, TSchema> & {
  returns?: TSchema;
  run: (call: RouteCall<TSchema, TSchema, TSchema>) => Promise<unknown>;
};

/**
 * The routes of one resource, registered in the order they are declared: the document lists them in that
 * order.
 */
export class ResourceRoutes<V extends TSchema> {
  constructor(
    private readonly app: ApiInstance,
    private readonly resource: ResourceRouteOptions<V>,
  ) {}

  /** `GET /things`: one page of a list. */
  list<Q extends TSchema, P extends TSchema = TUnknown, D extends TSchema = V>(
    route: ListRoute<P, Q, D>,
  ): void {
    this.register('GET', '', 'read', route as unknown as AnyDeclaration, true);
  }

  /** `POST /things`. */
  create<
    B extends TSchema,
    P extends TSchema = TUnknown,
    Q extends TSchema = TUnknown,
    D extends TSchema = V,
  >(route: OneRoute<P, Q, B, D>): void {
    this.register('POST', '', 'write', route as unknown as AnyDeclaration, false);
  }

  /** `GET /things/:id`. */
  get<P extends TSchema = typeof IdParams, Q extends TSchema = TUnknown, D extends TSchema = V>(
    route: OneRoute<P, Q, TUnknown, D>,
  ): void {
    this.register('GET', '/:id', 'read', route as unknown as AnyDeclaration, false);
  }

  /** `PATCH /things/:id`. */
  update<B extends TSchema, P extends TSchema = typeof IdParams, D extends TSchema = V>(
    route: OneRoute<P, TUnknown, B, D>,
  ): void {
    this.register('PATCH', '/:id', 'write', route as unknown as AnyDeclaration, false);
  }

  /** `DELETE /things/:id`. */
  delete<P extends TSchema = typeof IdParams, D extends TSchema = V>(
    route: OneRoute<P, TUnknown, TUnknown, D>,
  ): void {
    this.register('DELETE', '/:id', 'write', route as unknown as AnyDeclaration, false);
  }

  /** `POST /things/:id/<verb>`: an action on one record. */
  action<B extends TSchema = TUnknown, P extends TSchema = typeof IdParams, D extends TSchema = V>(
    verb: string,
    route: OneRoute<P, TUnknown, B, D>,
  ): void {
    this.register('POST', '/:id', 'write', route as unknown as AnyDeclaration, false, verb);
  }

  private register(
    method: HTTPMethods,
    usualPath: string,
    access: Access,
    route: AnyDeclaration,
    isList: boolean,
    verb?: string,
  ): void {
    const record = route.path ?? usualPath;
    const path = verb === undefined ? record : `${record}/${verb}`;
    const status = route.status ?? 200;
    const data = route.returns ?? this.resource.view;
    const params = route.params ?? (usualPath.startsWith('/:id') ? IdParams : undefined);
    const schema: FastifySchema & Record<string, unknown> = {
      tags: [this.resource.tag],
      summary: route.summary,
      description: route.description,
      ...(params && { params }),
      ...(route.query && { querystring: route.query }),
      ...(route.body && { body: route.body }),
      response: {
        [status]: described(isList ? ListEnvelope(data) : Envelope(data), route.answer),
        ...errorResponses(...(route.errors ?? [])),
      },
    };
    const config: FastifyContextConfig = {
      permission: [this.resource.permission, access],
      ...route.config,
      ...(route.viewOfMade && { idempotentCreate: { status, view: route.viewOfMade } }),
    };
    this.app.route({
      method,
      url: `${this.resource.path}${path}`,
      schema,
      config,
      handler: async (request, reply) => {
        const principal = principalOf(request);
        const answer = await route.run({
          principal,
          accountId: principal.accountId,
          params: request.params,
          query: request.query,
          body: request.body,
        });
        reply.code(status);
        return isList ? okList(request, answer as Page<unknown>) : ok(request, answer);
      },
    });
  }
}

/** The routes of the resource at `path`, declared one by one with the methods of `ResourceRoutes`. */
export function resourceRoutes<V extends TSchema>(
  app: ApiInstance,
  resource: ResourceRouteOptions<V>,
): ResourceRoutes<V> {
  return new ResourceRoutes(app, resource);
}
