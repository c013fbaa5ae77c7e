/**
 * Monitoring routes: an instance's metric history (`GET /instances/{id}/metrics`) and the live streams
 * over WebSocket (`…/metrics/stream` for one instance, `/metrics/stream` for up to 100 of the account's).
 *
 * Streams authenticate inside the socket (resources/metrics/streams.ts), so that a browser, which cannot
 * set headers on a WebSocket, can send its key as the first message, and so that every refusal is a
 * close code the client can read. The guard lets an upgrade to these routes through (`streamAuth`);
 * a plain GET on them still goes through the guard, and is answered with how to connect.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import { ok } from '../../platform/http/envelope.js';
import { principalOf } from '../../platform/http/plugins/guard.js';
import { described, errorResponses } from '../../platform/http/responses.js';
import { Envelope, IdParams, StringEnum, Timestamp } from '../../platform/http/schemas.js';
import type { InstanceService } from '../instances/service.js';
import { METRIC_NAMES } from './catalog.js';
import { metricsHistoryBody } from './history-body.js';
import { AGGREGATES } from './rollups.js';
import type { MetricsService } from './service.js';
import { MAX_POINTS } from './service.js';
import type { MetricsStreams, StreamScope, StreamSocket } from './streams.js';

/** Largest message a client may send (auth and subscribe messages are small). */
export const STREAM_MAX_PAYLOAD = 16 * 1024;

const MetricName = StringEnum(METRIC_NAMES);

const MetricsQuery = Type.Object(
  {
    start: Type.Optional(
      Type.String({ format: 'date-time', description: 'ISO 8601; default: one hour before `end`' }),
    ),
    end: Type.Optional(Type.String({ format: 'date-time', description: 'ISO 8601; default: now' })),
    step: Type.Optional(
      Type.Integer({
        minimum: 10,
        maximum: 86_400,
        multipleOf: 10,
        description:
          'Seconds between points, a multiple of 10; default and minimum: 10 when `start` is within the last 24 h, ' +
          `else 300. At most ${MAX_POINTS.toLocaleString('en')} points over the range.`,
      }),
    ),
    metrics: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 300,
        pattern: '^[a-z_]+(,[a-z_]+)*$',
        description: `Comma-separated, from: ${METRIC_NAMES.join(', ')} (gpu_percent on GPU types); default: all the instance has`,
      }),
    ),
    aggregate: Type.Optional(
      StringEnum(AGGREGATES, { description: 'How samples within one step combine; default avg' }),
    ),
  },
  { additionalProperties: false },
);

const Series = Type.Object({
  metric: MetricName,
  unit: StringEnum(['percent', 'bytes', 'bytes_per_second']),
  points: Type.Array(
    // A type list rather than anyOf: the serialiser picks by typeof instead of validating each item.
    Type.Array(Type.Unsafe<string | number>({ type: ['string', 'number'] }), {
      minItems: 2,
      maxItems: 2,
      description: '[timestamp (ISO 8601), value]',
    }),
    { description: 'In time order; a step without samples has no point (a gap, never a zero)' },
  ),
});

const MetricsHistory = Type.Object(
  {
    instance_id: Type.String(),
    start: Timestamp,
    end: Timestamp,
    step: Type.Integer({ description: 'Seconds between points as answered' }),
    aggregate: StringEnum(AGGREGATES),
    resolution: StringEnum(['raw', 'rollup'], {
      description: '`raw`: 10-second samples (kept 24 h); `rollup`: 5-minute avg/min/max (kept 30 days)',
    }),
    series: Type.Array(Series),
  },
  { $id: 'MetricsHistory', title: 'MetricsHistory' },
);

const StreamInfo = Type.Object({
  protocol: Type.Literal('websocket'),
  url: Type.String({ description: 'Where to connect: this URL with wss://' }),
  instance_id: Type.Optional(Type.String()),
  status: Type.Optional(Type.String({ description: 'The instance status now' })),
  message: Type.String(),
});

export const STREAM_PROTOCOL = [
  'Upgrade to a WebSocket (`wss://`). Authenticate with the usual `Authorization: Bearer <key>` or ',
  '`X-API-Key` header, or — browsers cannot set headers — send `{"type":"auth","api_key":"nmb_…"}` as the ',
  'first message within 5 s. The stream counts as one request against the rate limit, and so does each ',
  'client message; an account holds at most 100 streams at once (NIMBUS_METRICS_MAX_STREAMS). The key is ',
  'checked again on every message and at least every auth-cache lifetime (NIMBUS_AUTH_CACHE_SECONDS): a ',
  'revoked or expired key ends the stream with 4401, a suspended account or a lost permission with 4403.\n\n',
  'Server messages (JSON text): `{"type":"ready","interval":5,"instances":[…],"statuses":{…}}` once admitted; ',
  '`{"type":"metrics","instance_id","timestamp",cpu_percent,…}` every `interval` seconds while the instance ',
  'runs; `{"type":"status","instance_id","status","event","timestamp"}` on every transition (from any ',
  'replica); `{"type":"alert","event":"alert.firing"|"alert.resolved","instance_id","policy_id","incident_id",',
  '"name","metric","compare","state","window","value","threshold","started_at","resolved_at","timestamp"}` when ',
  "an incident of one of the account's alert policies fires or resolves on a watched instance (from any ",
  'replica); `{"type":"subscribed",…}` after a subscribe; `{"type":"error","code","message","details"}` ',
  'before a close. A message may carry `dropped`: samples this socket missed because it read too slowly.\n\n',
  'Client messages: `{"type":"subscribe","interval":1–60,"metrics":["cpu_percent",…]}` (on the account-wide ',
  'stream also `"instances":[up to 100 ids]`).\n\n',
  'Close codes: 4400 bad message, 4401 bad, missing, revoked or expired key, 4403 missing `monitoring:read` ',
  'or suspended account, 4404 instance not found, 4429 rate limited, too many streams or too many messages ',
  'waiting, 1009 a message over 16 KiB, 1000 the instance was deleted, 1001 server shutting down. The server pings every 30 s and drops a peer that does not answer. ',
  'A plain GET (no upgrade) answers 200 with where to connect. Protocol and transcripts: docs/api.md, ',
  '"Live metrics".',
].join('');

/** Sends a body already written as JSON (the schema's serialiser takes objects). */
function sendJsonBytes(reply: FastifyReply, body: Buffer) {
  return reply.type('application/json; charset=utf-8').send(body);
}

/** The API key an upgrade request carries in its headers, or null (the client may send an auth message). */
function headerKey(request: FastifyRequest): string | null {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? authorization;
  const header = request.headers['x-api-key'];
  return typeof header === 'string' && header.length > 0 ? header : null;
}

/** The `ws` socket as the stream service sees it. */
function adapt(socket: WebSocket): StreamSocket {
  return {
    // A Buffer holds a text message's UTF-8 (ws would frame it as binary without `binary: false`).
    send: (text) => socket.send(text, { binary: false }),
    bufferedAmount: () => socket.bufferedAmount,
    close: (code, reason) => socket.close(code, reason),
    ping: () => socket.ping(),
    terminate: () => socket.terminate(),
  };
}

function connect(
  streams: MetricsStreams,
  socket: WebSocket,
  request: FastifyRequest,
  scope: StreamScope,
): void {
  const session = streams.open(adapt(socket), scope, headerKey(request), request.ip);
  socket.on('message', (data, isBinary) => {
    if (session.closed) return;
    if (isBinary) {
      session.receive('\u0000binary');
      return;
    }
    session.receive(data.toString());
  });
  socket.on('pong', () => session.pong());
  socket.on('close', () => session.ended());
}

/** The answer to a plain GET on a stream route: where and how to connect. */
function connectionInfo(request: FastifyRequest, instance?: { id: string; status: string }) {
  return ok(request, {
    protocol: 'websocket' as const,
    url: `wss://${request.headers.host ?? 'localhost'}${request.url.split('?')[0]}`,
    ...(instance ? { instance_id: instance.id, status: instance.status } : {}),
    message:
      "Connect with a WebSocket client (Upgrade: websocket); the protocol is in this operation's description",
  });
}

export const metricRoutes: FastifyPluginAsyncTypebox<{
  metrics: MetricsService;
  metricStreams: MetricsStreams;
  instances: InstanceService;
}> = async (app, { metrics, metricStreams, instances }) => {
  const read = { permission: ['monitoring', 'read'] } as const;
  const tags = ['monitoring'];

  app.get(
    '/instances/:id/metrics',
    {
      schema: {
        tags,
        summary: 'Get metrics',
        description:
          'CPU, memory, disk, network (and GPU) history of an instance: one series per metric, `[timestamp, value]` ' +
          'points bucketed to `step` with `aggregate`. Ranges starting within the last 24 h come from 10-second ' +
          'samples, earlier ones from 5-minute rollups (kept 30 days). End before start, a range over 30 days, ' +
          `a step that is not a multiple of 10 or gives more than ${MAX_POINTS.toLocaleString('en')} points, and ` +
          'a metric the instance does not have are 400 with `details`.',
        params: IdParams,
        querystring: MetricsQuery,
        response: { 200: described(Envelope(MetricsHistory), 'The series'), ...errorResponses(404) },
      },
      config: read,
    },
    async (request, reply) => {
      const answer = await metrics.history(principalOf(request).accountId, request.params.id, request.query);
      // Written here rather than by the schema's serialiser: a day of points is 60,480 pairs
      // (resources/metrics/history-body.ts). The schema above still describes the body.
      return sendJsonBytes(reply, metricsHistoryBody(ok(request, answer)));
    },
  );

  app.route({
    method: 'GET',
    url: '/instances/:id/metrics/stream',
    schema: {
      tags,
      summary: 'Stream metrics over WebSocket',
      description: STREAM_PROTOCOL,
      params: IdParams,
      response: {
        101: { description: 'Switching Protocols: the WebSocket stream' },
        200: described(Envelope(StreamInfo), 'A plain GET (no upgrade): where and how to connect'),
        ...errorResponses(404),
      },
    },
    config: { ...read, streamAuth: true },
    handler: async (request) => {
      // Without an upgrade the guard has admitted the key: say where to connect.
      const instance = await instances.get(
        principalOf(request).accountId,
        (request.params as { id: string }).id,
      );
      return connectionInfo(request, instance);
    },
    wsHandler: (socket, request) =>
      connect(metricStreams, socket, request, { instanceId: (request.params as { id: string }).id }),
  });

  app.route({
    method: 'GET',
    url: '/metrics/stream',
    schema: {
      tags,
      summary: 'Stream metrics of several instances over WebSocket',
      description:
        'The account-wide stream: the same protocol as `/v1/instances/{id}/metrics/stream`, watching the instances ' +
        'named by a subscribe message (`"instances": [up to 100 ids]`, each of this account or 4404); messages ' +
        `carry \`instance_id\`. Until the first subscribe it watches none.\n\n${STREAM_PROTOCOL}`,
      response: {
        101: { description: 'Switching Protocols: the WebSocket stream' },
        200: described(Envelope(StreamInfo), 'A plain GET (no upgrade): where and how to connect'),
      },
    },
    config: { ...read, streamAuth: true },
    handler: async (request) => connectionInfo(request),
    wsHandler: (socket, request) => connect(metricStreams, socket, request, { account: true }),
  });
};
