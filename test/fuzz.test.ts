/**
 * Issue 20 item 7: requests generated from openapi/v1.json by bench/fuzz-requests.mjs, hostile ones
 * included (NUL and control characters, bidirectional overrides, huge strings, 1e309 and -0, deep
 * nesting, wrong types, bad percent-encoding), against each store. No answer may be a 5xx, every failure
 * must be the error envelope, and every answer must be what the document says for its operation:
 * sendRequest holds each one to the document (test/helpers/openapi-contract.ts).
 *
 * bench/fuzz.mjs sends 100,000 of the same requests to a started server (docs/benchmarks.md).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createExample,
  describeRequest,
  type FuzzRequest,
  fuzzRequests,
  problemWith,
} from '../bench/fuzz-requests.mjs';
import { STORES } from './helpers/backends.js';
import { serverForSuite } from './helpers/server.js';

const DOCUMENT = JSON.parse(
  readFileSync(
    path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'openapi', 'v1.json'),
    'utf8',
  ),
);
const RUNS_PER_STORE = 2000;

/** The request body the document shows as the example of a create. */
function exampleBody(pathName: string): unknown {
  const example = createExample(DOCUMENT, pathName);
  expect(example, `${pathName} has an example body`).toBeDefined();
  return example;
}

describe.each(STORES)('fuzzing every operation of the OpenAPI document (%s)', (store) => {
  // Capacity and address pools large enough that valid creates never meet a legitimate 503.
  const server = serverForSuite({
    store,
    env: {
      NIMBUS_GPU_CAPACITY: 'us-east-1=100000,us-west-2=100000',
      NIMBUS_PUBLIC_IP_POOLS:
        'us-east-1=100.64.0.0/16,us-west-2=100.65.0.0/16,eu-central-1=100.66.0.0/16,ap-northeast-1=100.67.0.0/16',
    },
  });

  it(`answers ${RUNS_PER_STORE} generated requests without a 5xx, every failure in the envelope`, async () => {
    const { key } = await server.createAccount({
      plan: 'enterprise',
      perHour: 100_000_000,
      burst: 100_000_000,
    });
    // Real ids, so that some requests reach a resource rather than stopping at 404.
    const ids: string[] = [];
    for (const [create, body] of [
      ['/v1/ssh-keys', exampleBody('/v1/ssh-keys')],
      ['/v1/instances', exampleBody('/v1/instances')],
      ['/v1/account/api-keys', exampleBody('/v1/account/api-keys')],
    ] as const) {
      const created = await server.request('POST', create, { key, body });
      expect(created.status, created.text).toBeLessThan(300);
      ids.push(created.body.data.id);
    }
    const events = await server.request('GET', '/v1/events', { key });
    ids.push(events.body.data[0].id);

    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fuzzRequests(DOCUMENT, { key, ids }), async (request: FuzzRequest) => {
        const reply = await server.request(request.method, request.path, {
          headers: request.headers,
          ...(request.body === undefined ? {} : { rawBody: request.body }),
        });
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
        const problem = problemWith(request, reply.status, reply.text);
        if (problem) throw new Error(`${describeRequest(request)} ${problem}: ${reply.text.slice(0, 400)}`);
      }),
      { numRuns: RUNS_PER_STORE },
    );

    // The requests got past validation often enough to mean something: successes and refusals of each kind.
    const count = (predicate: (status: number) => boolean) =>
      [...statuses].filter(([status]) => predicate(status)).reduce((sum, [, n]) => sum + n, 0);
    expect(count((status) => status >= 200 && status < 300)).toBeGreaterThan(RUNS_PER_STORE / 20);
    for (const status of [400, 404])
      expect(statuses.get(status) ?? 0, `answers ${status}`).toBeGreaterThan(10);
  }, 150_000);
});
