/**
 * The SDK (sdk/, types generated from openapi/v1.json) covers alerts like every other resource
 * (issue 21, item 5): typed create, get, patch and delete of policies, pagination, incident lists with
 * their filters, test notifications, and the typed errors (a 404 naming the body field, a 400 naming the
 * field and its allowed values). Against the real HTTPS server with 1 s collections, so an error policy
 * fires within seconds of a boot that fails.
 */
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type components, Nimbus, NimbusApiError, NotFoundError } from '../sdk/src/index.js';
import { account, waitFor } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

type Policy = components['schemas']['AlertPolicy'];
type Incident = components['schemas']['AlertIncident'];

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

describe('SDK: alerts', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
    },
  });
  const clients: Nimbus[] = [];
  const client = (apiKey: string) => {
    const made = new Nimbus({ apiKey, baseUrl: server.url, ca: readFileSync(server.running.certFile) });
    clients.push(made);
    return made;
  };
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((made) => made.close()));
  });

  it('creates, pages through, changes, tests and deletes policies with typed calls', async () => {
    const nimbus = client((await account(server)).key);
    const made: Policy[] = [];
    for (let i = 0; i < 12; i++) {
      const { data } = await nimbus.post('/v1/alerts', {
        body: {
          name: `policy-${i}`,
          metric: 'net_rx_bps',
          compare: 'above',
          threshold: 50_000_000,
          window: '10m',
          channels: { chat: [{ url: `${receiver.origin}/sdk`, format: 'discord' }] },
        },
      });
      made.push(data);
    }
    const seen: Policy[] = [];
    for await (const policy of nimbus.paginate('/v1/alerts', {
      params: { query: { limit: 5, sort: 'name' } },
    })) {
      seen.push(policy);
    }
    expect(seen.map((p) => p.id).sort()).toEqual(made.map((p) => p.id).sort());

    const first = made[0] as Policy;
    const { data: changed } = await nimbus.patch('/v1/alerts/{id}', {
      params: { path: { id: first.id } },
      body: { compare: 'below', threshold: 1000, description: 'Traffic stopped' },
    });
    expect(changed).toMatchObject({ compare: 'below', threshold: 1000, description: 'Traffic stopped' });
    const { data: tested } = await nimbus.post('/v1/alerts/{id}/test', {
      params: { path: { id: first.id } },
    });
    expect(tested.results).toMatchObject([{ channel: 'chat', status: 'succeeded' }]);
    await nimbus.delete('/v1/alerts/{id}', { params: { path: { id: first.id } } });
    const gone = await nimbus
      .get('/v1/alerts/{id}', { params: { path: { id: first.id } } })
      .catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(NotFoundError);
    expect((gone as NotFoundError).details).toEqual({ resource: 'alert', id: first.id });
  });

  it('throws typed errors naming the field', async () => {
    const nimbus = client((await account(server)).key);
    const other = client((await account(server)).key);
    const { data: theirs } = await other.post('/v1/instances', {
      body: { name: 'theirs', instance_type: 'compute-1x', region: 'us-east-1', image: 'ubuntu-24.04' },
    });
    const notFound = await nimbus
      .post('/v1/alerts', {
        body: {
          name: 'x',
          state: 'error',
          targets: { instance_ids: [theirs.id] },
          channels: { chat: [{ url: `${receiver.origin}/x`, format: 'generic' }] },
        },
      })
      .catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(NotFoundError);
    expect((notFound as NotFoundError).details).toEqual({
      resource: 'instance',
      id: theirs.id,
      field: 'targets.instance_ids',
    });
    const invalid = await nimbus
      .post('/v1/alerts', {
        body: {
          name: 'x',
          metric: 'cpu_percent',
          compare: 'above',
          threshold: 5,
          // @ts-expect-error the SDK's types know the windows; the server says the same at run time
          window: '2m',
          channels: {},
        },
      })
      .catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(NimbusApiError);
    expect((invalid as NimbusApiError).status).toBe(400);
    expect((invalid as NimbusApiError).details).toMatchObject({
      field: 'window',
      value: '2m',
      allowed_values: ['1m', '5m', '10m', '30m', '1h'],
    });
  });

  it('lists incidents with their notifications, by status and instance', async () => {
    const nimbus = client((await account(server)).key);
    const { data: policy } = await nimbus.post('/v1/alerts', {
      body: {
        name: 'Broken',
        state: 'error',
        channels: { chat: [{ url: `${receiver.origin}/sdk-broken`, format: 'slack' }] },
      },
    });
    const { data: instance } = await nimbus.post('/v1/instances', {
      body: {
        name: 'doomed',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'ubuntu-24.04',
        tags: { 'nimbus.sim/fault': 'boot-error' },
      },
    });
    const incidents = await waitFor(
      'an incident with its notification sent',
      async () => {
        const { data } = await nimbus.get('/v1/alerts/incidents', {
          params: { query: { status: 'firing', instance_id: instance.id } },
        });
        const sent = data.filter((i: Incident) => i.notifications.some((n) => n.status === 'succeeded'));
        return sent.length > 0 ? sent : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(incidents).toMatchObject([
      { policy_id: policy.id, instance_id: instance.id, instance_name: 'doomed', status: 'firing' },
    ]);
    const { data: ofPolicy } = await nimbus.get('/v1/alerts/{id}/incidents', {
      params: { path: { id: policy.id }, query: { status: 'resolved' } },
    });
    expect(ofPolicy).toEqual([]);
  });
});
