/**
 * Alert policies (issue 21, item 1) over HTTPS on both stores: create, read, list, change and delete;
 * every bad field as a table (400 invalid_request naming field, value and allowed_values where a set
 * exists); another account's instance or webhook id is a 404 naming the field; the quota per plan; read
 * and write permissions; and, on a server without NIMBUS_SMTP_URL, e-mail channels refused with a 400
 * naming the setting. Chat URLs here are public addresses of a documentation range, judged by the SSRF
 * rule like webhook URLs (NIMBUS_WEBHOOK_ALLOW_PRIVATE is not set).
 */
import { describe, expect, it } from 'vitest';
import {
  ALERT_COMPARES,
  ALERT_METRICS,
  ALERT_STATES,
  ALERT_WINDOWS,
  CHAT_FORMATS,
} from '../src/resources/alerts/rules.js';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite } from './helpers/server.js';

const CHAT = 'https://198.51.100.7/hooks/chat';

const valid = () => ({
  name: 'High CPU',
  metric: 'cpu_percent',
  compare: 'above',
  threshold: 80,
  window: '5m',
  channels: { chat: [{ url: CHAT, format: 'slack' }] },
});

type Body = Record<string, unknown>;

/** The valid body with some fields replaced (undefined: removed). */
function changed(patch: Body, base: Body = valid()): Body {
  const out: Body = { ...base };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) delete out[key];
    else out[key] = value;
  }
  return out;
}

const stateBody = (patch: Body = {}) =>
  changed({ metric: undefined, compare: undefined, threshold: undefined, window: undefined, ...patch });

interface BadCase {
  what: string;
  body: Body;
  field: string;
  value?: unknown;
  allowed?: readonly unknown[];
}

const BAD: BadCase[] = [
  { what: 'no name', body: changed({ name: undefined }), field: 'name' },
  { what: 'an empty name', body: changed({ name: '' }), field: 'name', value: '' },
  { what: 'a name with a control character', body: changed({ name: 'cpu\u0007' }), field: 'name' },
  { what: 'a name of 101 characters', body: changed({ name: 'x'.repeat(101) }), field: 'name' },
  {
    what: 'a description of 501 characters',
    body: changed({ description: 'd'.repeat(501) }),
    field: 'description',
  },
  {
    what: 'an unknown metric',
    body: changed({ metric: 'cpu' }),
    field: 'metric',
    value: 'cpu',
    allowed: ALERT_METRICS,
  },
  {
    what: 'an unknown compare',
    body: changed({ compare: 'over' }),
    field: 'compare',
    value: 'over',
    allowed: ALERT_COMPARES,
  },
  { what: 'a threshold as text', body: changed({ threshold: '80' }), field: 'threshold', value: '80' },
  { what: 'a CPU threshold over 100', body: changed({ threshold: 100.5 }), field: 'threshold', value: 100.5 },
  {
    what: 'a memory threshold below 0',
    body: changed({ metric: 'memory_percent', threshold: -1 }),
    field: 'threshold',
    value: -1,
  },
  {
    what: 'a negative rate threshold',
    body: changed({ metric: 'net_rx_bps', threshold: -5 }),
    field: 'threshold',
    value: -5,
  },
  {
    what: 'an unknown window',
    body: changed({ window: '2m' }),
    field: 'window',
    value: '2m',
    allowed: ALERT_WINDOWS,
  },
  {
    what: 'a metric without compare',
    body: changed({ compare: undefined }),
    field: 'compare',
    value: null,
    allowed: ALERT_COMPARES,
  },
  {
    what: 'a metric without threshold',
    body: changed({ threshold: undefined }),
    field: 'threshold',
    value: null,
  },
  {
    what: 'a metric without window',
    body: changed({ window: undefined }),
    field: 'window',
    value: null,
    allowed: ALERT_WINDOWS,
  },
  {
    what: 'neither metric nor state',
    body: changed({ metric: undefined }),
    field: 'metric',
    value: null,
    allowed: ALERT_METRICS,
  },
  { what: 'both metric and state', body: changed({ state: 'error' }), field: 'state', value: 'error' },
  {
    what: 'an unknown state',
    body: stateBody({ state: 'crashed' }),
    field: 'state',
    value: 'crashed',
    allowed: ALERT_STATES,
  },
  {
    what: 'stuck without a window',
    body: stateBody({ state: 'stuck' }),
    field: 'window',
    value: null,
    allowed: ALERT_WINDOWS,
  },
  {
    what: 'error with a window',
    body: stateBody({ state: 'error', window: '5m' }),
    field: 'window',
    value: '5m',
  },
  {
    what: 'a state with compare',
    body: stateBody({ state: 'error', compare: 'above' }),
    field: 'compare',
    value: 'above',
  },
  {
    what: 'a state with a threshold',
    body: stateBody({ state: 'stuck', window: '5m', threshold: 3 }),
    field: 'threshold',
    value: 3,
  },
  {
    what: 'instance_ids not a list',
    body: changed({ targets: { instance_ids: 'ins_1' } }),
    field: 'targets.instance_ids',
    value: 'ins_1',
  },
  {
    what: 'a tag value not text',
    body: changed({ targets: { tags: { env: 1 } } }),
    field: 'targets.tags.env',
    value: 1,
  },
  { what: 'an unknown target field', body: changed({ targets: { names: ['web'] } }), field: 'targets.names' },
  { what: 'no channels', body: changed({ channels: undefined }), field: 'channels' },
  {
    what: 'empty channels',
    body: changed({ channels: {} }),
    field: 'channels',
    allowed: ['email', 'webhook', 'chat'],
  },
  { what: 'an unknown channel', body: changed({ channels: { sms: ['+15551234'] } }), field: 'channels.sms' },
  {
    what: 'a bad e-mail address',
    body: changed({ channels: { email: ['oncall-at-example.com'] } }),
    field: 'channels.email.0',
    value: 'oncall-at-example.com',
  },
  // Only a DNS domain: an IP literal would aim the relay at an address of the sender's choosing, and an
  // encoded word may be decoded by a relay into other addresses.
  ...[
    ['an IP literal', 'victim@[127.0.0.1]'],
    ['an IPv6 literal', 'victim@[IPv6:::1]'],
    ['a dotted IPv4 domain', 'victim@127.0.0.1'],
    ['an encoded word', '=?utf-8?q?victim=40example.net?=@example.com'],
    ['a quoted local part', '"victim@example.net"@example.com'],
    ['a control character', 'on\u0007call@example.com'],
    ['a local part over 64 characters', `${'a'.repeat(65)}@example.com`],
    ['a label over 63 characters', `oncall@${'b'.repeat(64)}.example.com`],
  ].map(([what, address]) => ({
    what: `an e-mail address with ${what}`,
    body: changed({ channels: { email: ['oncall@example.com', address] } }),
    field: 'channels.email.1',
    value: address,
  })),
  {
    what: 'an e-mail address twice',
    body: changed({ channels: { email: ['a@example.com', 'A@example.com'] } }),
    field: 'channels.email.1',
    value: 'a@example.com',
  },
  {
    what: 'an empty webhook id',
    body: changed({ channels: { webhook_ids: [''] } }),
    field: 'channels.webhook_ids.0',
    value: '',
  },
  {
    what: 'a chat URL over http',
    body: changed({ channels: { chat: [{ url: 'http://198.51.100.7/x', format: 'slack' }] } }),
    field: 'channels.chat.0.url',
    value: 'http://198.51.100.7/x',
  },
  {
    what: 'a chat URL with credentials',
    body: changed({ channels: { chat: [{ url: 'https://u:p@198.51.100.7/x', format: 'slack' }] } }),
    field: 'channels.chat.0.url',
  },
  {
    what: 'a chat URL on loopback',
    body: changed({ channels: { chat: [{ url: 'https://127.0.0.1:8443/x', format: 'generic' }] } }),
    field: 'channels.chat.0.url',
    value: 'https://127.0.0.1:8443/x',
  },
  {
    what: 'a chat URL at the metadata address',
    body: changed({ channels: { chat: [{ url: 'https://169.254.169.254/x', format: 'generic' }] } }),
    field: 'channels.chat.0.url',
  },
  {
    what: 'a chat URL on a private network',
    body: changed({ channels: { chat: [{ url: 'https://10.1.2.3/x', format: 'discord' }] } }),
    field: 'channels.chat.0.url',
  },
  {
    what: 'an unknown chat format',
    body: changed({ channels: { chat: [{ url: CHAT, format: 'teams' }] } }),
    field: 'channels.chat.0.format',
    value: 'teams',
    allowed: CHAT_FORMATS,
  },
  {
    what: 'a chat without format',
    body: changed({ channels: { chat: [{ url: CHAT }] } }),
    field: 'channels.chat.0.format',
  },
  {
    what: 'the same chat URL twice',
    body: changed({
      channels: {
        chat: [
          { url: CHAT, format: 'slack' },
          { url: CHAT, format: 'generic' },
        ],
      },
    }),
    field: 'channels.chat.1',
    value: CHAT,
  },
  { what: 'enabled as text', body: changed({ enabled: 'yes' }), field: 'enabled', value: 'yes' },
  { what: 'an unknown field', body: changed({ severity: 'page' }), field: 'severity' },
];

describe.each(STORES)('alert policies (%s)', (store) => {
  const server = serverForSuite({ store, env: { NIMBUS_SMTP_URL: 'smtp://127.0.0.1:2' } });

  async function create(key: string, body: Body = valid()) {
    const reply = await server.request('POST', '/v1/alerts', { key, body });
    expect(reply.status, reply.text).toBe(201);
    return reply.body.data as Record<string, any>;
  }

  it('creates a metric policy and reads it back, with the defaults filled in', async () => {
    const owner = await account(server);
    const policy = await create(owner.key, {
      ...valid(),
      description: 'Page when the fleet runs hot',
      targets: { tags: { env: 'prod' } },
      channels: { email: ['oncall@example.com'], chat: [{ url: CHAT, format: 'discord' }] },
    });
    expect(policy).toEqual({
      id: expect.stringMatching(/^alr_[0-9a-z]{26}$/),
      name: 'High CPU',
      description: 'Page when the fleet runs hot',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '5m',
      state: null,
      targets: { instance_ids: [], tags: { env: 'prod' } },
      channels: { email: ['oncall@example.com'], webhook_ids: [], chat: [{ url: CHAT, format: 'discord' }] },
      enabled: true,
      created_at: expect.any(String),
      updated_at: policy.created_at,
    });
    const read = await server.request('GET', `/v1/alerts/${policy.id}`, { key: owner.key });
    expect(read.status).toBe(200);
    expect(read.body.data).toEqual(policy);
  });

  it('creates state policies (error; stuck with a window) and targets by id and webhook channels', async () => {
    const owner = await account(server);
    const instance = await createInstance(server, owner.key);
    const hook = await server.request('POST', '/v1/webhooks', {
      key: owner.key,
      body: { url: 'https://198.51.100.8/nimbus', events: ['instance.*'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const error = await create(owner.key, stateBody({ name: 'Broken', state: 'error' }));
    expect(error).toMatchObject({
      state: 'error',
      metric: null,
      compare: null,
      threshold: null,
      window: null,
    });
    const stuck = await create(
      owner.key,
      stateBody({
        name: 'Stuck',
        state: 'stuck',
        window: '10m',
        targets: { instance_ids: [instance.id] },
        channels: { webhook_ids: [hook.body.data.id] },
      }),
    );
    expect(stuck).toMatchObject({
      state: 'stuck',
      window: '10m',
      targets: { instance_ids: [instance.id], tags: {} },
      channels: { email: [], webhook_ids: [hook.body.data.id], chat: [] },
    });
  });

  it('refuses every bad field with 400 invalid_request naming field, value and allowed values', async () => {
    const owner = await account(server);
    for (const bad of BAD) {
      const reply = await server.request('POST', '/v1/alerts', { key: owner.key, body: bad.body });
      const error = expectError(reply, 400, 'invalid_request');
      expect(error.details?.field, `${bad.what}: ${reply.text}`).toBe(bad.field);
      if ('value' in bad) expect(error.details?.value, bad.what).toEqual(bad.value);
      if (bad.allowed) expect(error.details?.allowed_values, bad.what).toEqual([...bad.allowed]);
    }
    // Nothing was saved.
    const list = await server.request('GET', '/v1/alerts', { key: owner.key });
    expect(list.body.pagination.total_items).toBe(0);
  });

  it('a threshold out of its metric range says the range', async () => {
    const owner = await account(server);
    const reply = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: changed({ metric: 'gpu_percent', threshold: 120 }),
    });
    expect(expectError(reply, 400, 'invalid_request').details).toMatchObject({
      field: 'threshold',
      value: 120,
      minimum: 0,
      maximum: 100,
      unit: 'percent',
    });
    // Rates have no upper bound.
    await create(owner.key, changed({ metric: 'disk_write_bps', threshold: 5e9 }));
  });

  it("another account's instance or webhook is a 404 naming the field; so is one that does not exist", async () => {
    const owner = await account(server);
    const other = await account(server);
    const theirs = await createInstance(server, other.key);
    const theirHook = await server.request('POST', '/v1/webhooks', {
      key: other.key,
      body: { url: 'https://198.51.100.9/hook', events: ['*'] },
    });
    expect(theirHook.status).toBe(201);
    const instance = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: changed({ targets: { instance_ids: [theirs.id] } }),
    });
    expect(expectError(instance, 404, 'not_found').details).toMatchObject({
      resource: 'instance',
      id: theirs.id,
      field: 'targets.instance_ids',
    });
    const made = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: changed({ targets: { instance_ids: ['ins_00000000000000000000000000'] } }),
    });
    expect(expectError(made, 404, 'not_found').details?.field).toBe('targets.instance_ids');
    const webhook = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: changed({ channels: { webhook_ids: [theirHook.body.data.id] } }),
    });
    expect(expectError(webhook, 404, 'not_found').details).toMatchObject({
      resource: 'webhook',
      id: theirHook.body.data.id,
      field: 'channels.webhook_ids',
    });
  });

  it('lists, sorts and filters policies; patches and deletes them; another account sees 404', async () => {
    const owner = await account(server);
    const other = await account(server);
    const b = await create(owner.key, changed({ name: 'b-policy' }));
    const a = await create(owner.key, changed({ name: 'a-policy', enabled: false }));
    const byName = await server.request('GET', '/v1/alerts?sort=name&order=asc', { key: owner.key });
    expect(byName.body.data.map((p: { id: string }) => p.id)).toEqual([a.id, b.id]);
    expect(byName.body.pagination).toMatchObject({ page: 1, total_items: 2, total_pages: 1 });
    const newest = await server.request('GET', '/v1/alerts', { key: owner.key });
    expect(newest.body.data.map((p: { id: string }) => p.id)).toEqual([a.id, b.id]);
    const enabled = await server.request('GET', '/v1/alerts?enabled=true', { key: owner.key });
    expect(enabled.body.data.map((p: { id: string }) => p.id)).toEqual([b.id]);
    expectInvalid(await server.request('GET', '/v1/alerts?sort=threshold', { key: owner.key }), 'sort');

    const patched = await server.request('PATCH', `/v1/alerts/${b.id}`, {
      key: owner.key,
      body: { name: 'renamed', threshold: 95, window: '10m' },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({
      name: 'renamed',
      threshold: 95,
      window: '10m',
      metric: 'cpu_percent',
    });
    expect(Date.parse(patched.body.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(b.updated_at));
    // Switching to a state policy clears the metric fields; leaving one behind is refused.
    const half = await server.request('PATCH', `/v1/alerts/${b.id}`, {
      key: owner.key,
      body: { metric: null, state: 'error' },
    });
    expectInvalid(half, 'compare');
    const switched = await server.request('PATCH', `/v1/alerts/${b.id}`, {
      key: owner.key,
      body: { metric: null, compare: null, threshold: null, window: null, state: 'error' },
    });
    expect(switched.status, switched.text).toBe(200);
    expect(switched.body.data).toMatchObject({ metric: null, threshold: null, state: 'error' });
    expectInvalid(await server.request('PATCH', `/v1/alerts/${b.id}`, { key: owner.key, body: {} }), 'body');
    expectInvalid(
      await server.request('PATCH', `/v1/alerts/${b.id}`, { key: owner.key, body: { channels: {} } }),
      'channels',
    );

    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'theirs now' }],
      ['DELETE', undefined],
    ] as const) {
      const reply = await server.request(method, `/v1/alerts/${b.id}`, {
        key: other.key,
        ...(body ? { body } : {}),
      });
      expect(expectError(reply, 404, 'not_found').details).toMatchObject({ resource: 'alert', id: b.id });
    }
    expectError(
      await server.request('GET', `/v1/alerts/${b.id}/incidents`, { key: other.key }),
      404,
      'not_found',
    );
    expectError(
      await server.request('POST', `/v1/alerts/${b.id}/test`, { key: other.key }),
      404,
      'not_found',
    );

    const deleted = await server.request('DELETE', `/v1/alerts/${b.id}`, { key: owner.key });
    expect(deleted.status).toBe(200);
    expect(deleted.body.data.id).toBe(b.id);
    expectError(await server.request('GET', `/v1/alerts/${b.id}`, { key: owner.key }), 404, 'not_found');
  });

  it('counts policies against the plan quota: 10 on free, 100 on professional, 1,000 on enterprise', async () => {
    const free = await server.createAccount({ plan: 'free', perHour: 100_000, burst: 1_000 });
    for (let i = 0; i < 10; i++) await create(free.key, changed({ name: `p${i}` }));
    const over = await server.request('POST', '/v1/alerts', { key: free.key, body: valid() });
    expect(expectError(over, 403, 'quota_exceeded').details).toEqual({
      quota: 'alerts',
      limit: 10,
      used: 10,
      requested: 1,
    });
    const quotas = async (key: string) =>
      Object.fromEntries(
        ((await server.request('GET', '/v1/account/quota', { key })).body.data as { name: string }[]).map(
          (q) => [q.name, q],
        ),
      );
    expect((await quotas(free.key)).alerts).toEqual({ name: 'alerts', limit: 10, used: 10 });
    const pro = await account(server, 'professional');
    expect((await quotas(pro.key)).alerts).toEqual({ name: 'alerts', limit: 100, used: 0 });
    const big = await account(server, 'enterprise');
    expect((await quotas(big.key)).alerts).toEqual({ name: 'alerts', limit: 1000, used: 0 });
  });

  it('monitoring:read lists and reads; monitoring:write is needed to change', async () => {
    const owner = await account(server);
    const policy = await create(owner.key);
    const minted = await server.request('POST', '/v1/account/api-keys', {
      key: owner.key,
      body: { name: 'reader', permissions: ['monitoring:read'] },
    });
    const reader = minted.body.data.key as string;
    expect((await server.request('GET', '/v1/alerts', { key: reader })).status).toBe(200);
    expect((await server.request('GET', `/v1/alerts/${policy.id}`, { key: reader })).status).toBe(200);
    expect((await server.request('GET', '/v1/alerts/incidents', { key: reader })).status).toBe(200);
    expectError(await server.request('POST', '/v1/alerts', { key: reader, body: valid() }), 403, 'forbidden');
    expectError(
      await server.request('PATCH', `/v1/alerts/${policy.id}`, { key: reader, body: { name: 'x' } }),
      403,
      'forbidden',
    );
    expectError(await server.request('DELETE', `/v1/alerts/${policy.id}`, { key: reader }), 403, 'forbidden');
    expectError(
      await server.request('POST', `/v1/alerts/${policy.id}/test`, { key: reader }),
      403,
      'forbidden',
    );
  });
});

describe('alert policies without NIMBUS_SMTP_URL', () => {
  const server = serverForSuite({ store: 'sqlite' });

  it('refuses an e-mail channel with a 400 naming the missing setting, on create and on change', async () => {
    const owner = await account(server);
    const reply = await server.request('POST', '/v1/alerts', {
      key: owner.key,
      body: changed({ channels: { email: ['oncall@example.com'] } }),
    });
    const error = expectError(reply, 400, 'invalid_request');
    expect(error.message).toContain('NIMBUS_SMTP_URL');
    expect(error.details).toEqual({
      field: 'channels.email',
      value: ['oncall@example.com'],
      setting: 'NIMBUS_SMTP_URL',
    });
    const policy = await server.request('POST', '/v1/alerts', { key: owner.key, body: valid() });
    expect(policy.status, policy.text).toBe(201);
    const patch = await server.request('PATCH', `/v1/alerts/${policy.body.data.id}`, {
      key: owner.key,
      body: { channels: { email: ['oncall@example.com'] } },
    });
    expect(expectError(patch, 400, 'invalid_request').details?.setting).toBe('NIMBUS_SMTP_URL');
  });
});
