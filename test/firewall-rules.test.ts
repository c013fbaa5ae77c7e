/**
 * Firewall rules over HTTPS, on both stores: create/get/list/patch/delete with canonical addresses and
 * events; every validation case as a table; precedence answered by /network/check (user rules by
 * priority, then the preset, then the private network and the default policy); tag selectors following
 * an instance's tags as they change; preset changes by PATCH; the effective list in /network; other
 * accounts' rules and instances as 404 everywhere; the quota; list filters and sorts.
 */
import { describe, expect, it } from 'vitest';
import { STORES } from './helpers/backends.js';
import { account, expectError, expectInvalid } from './helpers/common.js';
import { createInstance } from './helpers/instances.js';
import { serverForSuite, type TestServer } from './helpers/server.js';

type Json = Record<string, any>;

const SSH_FROM_OFFICE = {
  name: 'ssh-office',
  direction: 'inbound',
  action: 'allow',
  protocol: 'tcp',
  ports: '22',
  sources: ['198.51.100.0/24'],
  region: 'us-east-1',
};

async function createRule(server: TestServer, key: string, body: Json): Promise<Json> {
  const reply = await server.request('POST', '/v1/firewall/rules', {
    key,
    body: { ...SSH_FROM_OFFICE, ...body },
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.body.data;
}

async function check(
  server: TestServer,
  key: string,
  instanceId: string,
  query: Record<string, string | number>,
) {
  const qs = new URLSearchParams(
    Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]),
  ).toString();
  const reply = await server.request('GET', `/v1/instances/${instanceId}/network/check?${qs}`, { key });
  expect(reply.status, reply.text).toBe(200);
  return reply.body.data as { verdict: string; matched_rule: Json; packet: Json };
}

/** "Can `address` reach tcp `port` on the instance?" as [verdict, where the deciding rule came from, its id]. */
async function reach(server: TestServer, key: string, instanceId: string, address: string, port: number) {
  const answer = await check(server, key, instanceId, { protocol: 'tcp', port, address });
  return [answer.verdict, answer.matched_rule.source, answer.matched_rule.id] as const;
}

describe.each(STORES)('Firewall rules (%s)', (store) => {
  const server = serverForSuite({ store });

  describe('create, read, change, delete', () => {
    it('stores a rule with defaults and canonical addresses, and writes firewall_rule.* events', async () => {
      const { key } = await account(server);
      const created = await createRule(server, key, {
        name: 'db',
        ports: '05432',
        sources: ['198.51.100.7', '2001:DB8:0:0::/64', '198.51.100.7/32'],
      });
      expect(created).toMatchObject({
        name: 'db',
        description: '',
        direction: 'inbound',
        action: 'allow',
        protocol: 'tcp',
        ports: '5432',
        sources: ['198.51.100.7/32', '2001:db8::/64'],
        destinations: [],
        priority: 1000,
        targets: { instance_ids: [], tags: {} },
        region: 'us-east-1',
        enabled: true,
      });
      expect(created.id).toMatch(/^fwr_[0-9a-z]{26}$/);
      expect(created.updated_at).toBe(created.created_at);

      const got = await server.request('GET', `/v1/firewall/rules/${created.id}`, { key });
      expect(got.body.data).toEqual(created);

      const outbound = await createRule(server, key, {
        name: 'out',
        direction: 'outbound',
        action: 'deny',
        protocol: 'udp',
        ports: '53',
        sources: undefined,
      });
      expect(outbound).toMatchObject({ sources: [], destinations: ['0.0.0.0/0', '::/0'] });
      const anywhere = await createRule(server, key, { name: 'any', sources: undefined });
      expect(anywhere.sources).toEqual(['0.0.0.0/0', '::/0']);

      const patched = await server.request('PATCH', `/v1/firewall/rules/${created.id}`, {
        key,
        body: { priority: 10, enabled: false, description: 'postgres from the office' },
      });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body.data).toMatchObject({ priority: 10, enabled: false, ports: '5432' });
      expect(patched.body.data.updated_at >= created.updated_at).toBe(true);

      // Turning to icmp drops the ports; turning around moves the rule to destinations (anywhere).
      const icmp = await server.request('PATCH', `/v1/firewall/rules/${created.id}`, {
        key,
        body: { protocol: 'icmp', direction: 'outbound' },
      });
      expect(icmp.body.data).toMatchObject({
        protocol: 'icmp',
        ports: null,
        sources: [],
        destinations: ['0.0.0.0/0', '::/0'],
      });

      // Now outbound: sources is the wrong list, destinations the right one.
      expectInvalid(
        await server.request('PATCH', `/v1/firewall/rules/${created.id}`, {
          key,
          body: { sources: ['192.0.2.0/24'] },
        }),
        'sources',
      );
      const narrowed = await server.request('PATCH', `/v1/firewall/rules/${created.id}`, {
        key,
        body: { destinations: ['192.0.2.0/24'] },
      });
      expect(narrowed.body.data).toMatchObject({ sources: [], destinations: ['192.0.2.0/24'] });

      const deleted = await server.request('DELETE', `/v1/firewall/rules/${created.id}`, { key });
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body.data.id).toBe(created.id);
      expectError(await server.request('GET', `/v1/firewall/rules/${created.id}`, { key }), 404, 'not_found');

      const events = await server.request('GET', `/v1/events?resource_id=${created.id}&limit=100`, { key });
      const log = [...(events.body.data as Json[])].reverse();
      expect(log.map((e) => e.type)).toEqual([
        'firewall_rule.created',
        'firewall_rule.updated',
        'firewall_rule.updated',
        'firewall_rule.updated',
        'firewall_rule.deleted',
      ]);
      expect(log[0]?.data).toMatchObject({
        firewall_rule_id: created.id,
        name: 'db',
        protocol: 'tcp',
        ports: '5432',
      });
      expect(log[1]?.data.changed).toEqual(['priority', 'enabled', 'description']);
      expect(log[2]?.data).toMatchObject({ protocol: 'icmp', direction: 'outbound', ports: null });
      expect(log[3]?.data.changed).toEqual(['destinations']);
    });

    it('an Idempotency-Key replays the create instead of making a second rule', async () => {
      const { key } = await account(server);
      const send = () =>
        server.request('POST', '/v1/firewall/rules', {
          key,
          body: SSH_FROM_OFFICE,
          headers: { 'idempotency-key': 'fw-create-1' },
        });
      const first = await send();
      const again = await send();
      expect(first.status, first.text).toBe(201);
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.data.id).toBe(first.body.data.id);
      const list = await server.request('GET', '/v1/firewall/rules', { key });
      expect(list.body.pagination.total_items).toBe(1);
    });
  });

  describe('validation', () => {
    const cases: [string, Json, string, string[]?][] = [
      ['host bits set (IPv4)', { sources: ['10.0.0.7/8'] }, 'sources.0'],
      ['host bits set (IPv6)', { sources: ['2001:db8::1/32'] }, 'sources.0'],
      ['a bad CIDR', { sources: ['198.51.100.0/24', '300.1.1.1/8'] }, 'sources.1'],
      ['a prefix too long', { sources: ['10.0.0.0/33'] }, 'sources.0'],
      ['an IPv6 prefix too long', { sources: ['::/129'] }, 'sources.0'],
      ['a host name', { sources: ['example.com'] }, 'sources.0'],
      ['an empty address list', { sources: [] }, 'sources'],
      ['too many sources', { sources: Array.from({ length: 101 }, (_, i) => `10.0.${i}.0/24`) }, 'sources'],
      ['destinations on an inbound rule', { destinations: ['10.0.0.0/8'] }, 'destinations'],
      ['sources on an outbound rule', { direction: 'outbound' }, 'sources'],
      ['port 0', { ports: '0' }, 'ports'],
      ['port 65536', { ports: '65536' }, 'ports'],
      ['a reversed range', { ports: '8100-8000' }, 'ports'],
      ['a port list', { ports: '22,80' }, 'ports'],
      ['no ports on tcp', { ports: undefined }, 'ports'],
      ['null ports on udp', { protocol: 'udp', ports: null }, 'ports'],
      ['ports on icmp', { protocol: 'icmp', ports: '22' }, 'ports'],
      ['ports on all', { protocol: 'all', ports: '1-100' }, 'ports'],
      ['an unknown protocol', { protocol: 'sctp' }, 'protocol', ['tcp', 'udp', 'icmp', 'all']],
      ['an unknown direction', { direction: 'sideways' }, 'direction', ['inbound', 'outbound']],
      ['an unknown action', { action: 'drop' }, 'action', ['allow', 'deny']],
      ['priority 0', { priority: 0 }, 'priority'],
      ['priority 65536', { priority: 65536 }, 'priority'],
      ['an unknown region', { region: 'mars-1' }, 'region'],
      ['no region', { region: undefined }, 'region'],
      ['a bad name', { name: 'has space' }, 'name'],
      ['a description with a control character', { description: 'line\u001bone' }, 'description'],
      ['a description too long', { description: 'x'.repeat(501) }, 'description'],
      ['a bad tag key in targets', { targets: { tags: { 'a:b': 'c' } } }, 'targets.tags'],
      ['an unknown targets field', { targets: { labels: {} } }, 'targets.labels'],
      ['an unknown field', { color: 'red' }, 'color'],
    ];
    it.each(cases)('%s is 400 naming the field', async (_label, change, field, allowed) => {
      const { key } = await account(server);
      const reply = await server.request('POST', '/v1/firewall/rules', {
        key,
        body: { ...SSH_FROM_OFFICE, ...change },
      });
      expectInvalid(reply, field);
      const details = reply.body.error.details;
      expect(details).toHaveProperty('value');
      if (allowed) expect(details.allowed_values).toEqual(allowed);
    });

    it('host bits: the answer names the block probably meant', async () => {
      const { key } = await account(server);
      const reply = await server.request('POST', '/v1/firewall/rules', {
        key,
        body: { ...SSH_FROM_OFFICE, sources: ['10.0.0.7/8'] },
      });
      const error = expectError(reply, 400, 'invalid_request');
      expect(error.details).toMatchObject({
        field: 'sources.0',
        value: '10.0.0.7/8',
        suggestion: '10.0.0.0/8',
      });
      expect(error.message).toContain('host bits');
    });

    it('PATCH checks the merged rule: tcp without ports, and an unknown field, are 400', async () => {
      const { key } = await account(server);
      const rule = await createRule(server, key, { protocol: 'icmp', ports: undefined });
      expectInvalid(
        await server.request('PATCH', `/v1/firewall/rules/${rule.id}`, { key, body: { protocol: 'tcp' } }),
        'ports',
      );
      expectInvalid(
        await server.request('PATCH', `/v1/firewall/rules/${rule.id}`, {
          key,
          body: { region: 'us-west-2' },
        }),
        'region',
      );
      expectInvalid(
        await server.request('PATCH', `/v1/firewall/rules/${rule.id}`, { key, body: {} }),
        'body',
      );
    });

    it('a target instance in another region is 400 naming it', async () => {
      const { key } = await account(server);
      const west = await createInstance(server, key, { region: 'us-west-2' });
      const reply = await server.request('POST', '/v1/firewall/rules', {
        key,
        body: { ...SSH_FROM_OFFICE, targets: { instance_ids: [west.id] } },
      });
      expectInvalid(reply, 'targets.instance_ids.0');
    });

    it.each([
      ['no protocol', { address: '198.51.100.7', port: '22' }, 'protocol'],
      ['a bad address', { protocol: 'tcp', port: '22', address: '198.51.100.0/24' }, 'address'],
      ['no port on tcp', { protocol: 'tcp', address: '198.51.100.7' }, 'port'],
      ['a port on icmp', { protocol: 'icmp', port: '22', address: '198.51.100.7' }, 'port'],
      ['port 0', { protocol: 'tcp', port: '0', address: '198.51.100.7' }, 'port'],
      ['protocol all', { protocol: 'all', address: '198.51.100.7' }, 'protocol'],
    ])('/network/check with %s is 400', async (_label, query, field) => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const qs = new URLSearchParams(query as Record<string, string>).toString();
      expectInvalid(
        await server.request('GET', `/v1/instances/${instance.id}/network/check?${qs}`, { key }),
        field,
      );
    });
  });

  describe('precedence, through /network/check', () => {
    it('ssh-only with no rules: SSH from anywhere, the private network, outbound; nothing else inbound', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      expect(await reach(server, key, instance.id, '203.0.113.50', 22)).toEqual(['allow', 'preset', null]);
      expect(await reach(server, key, instance.id, '2001:db8::9', 22)).toEqual(['allow', 'preset', null]);
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'default', null]);
      expect(await reach(server, key, instance.id, '10.10.3.4', 5432)).toEqual(['allow', 'default', null]);
      const out = await check(server, key, instance.id, {
        direction: 'outbound',
        protocol: 'udp',
        port: 53,
        address: '8.8.8.8',
      });
      expect(out).toMatchObject({
        verdict: 'allow',
        matched_rule: { source: 'default', direction: 'outbound' },
      });
      const ping = await check(server, key, instance.id, {
        protocol: 'icmp',
        address: '::ffff:198.51.100.7',
      });
      expect(ping).toMatchObject({ verdict: 'deny', packet: { port: null, address: '198.51.100.7' } });
    });

    it('can 198.51.100.7 reach port 5432? the lowest priority covering rule decides', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const allow = await createRule(server, key, { name: 'pg', ports: '5432', priority: 200 });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual([
        'allow',
        'rule',
        allow.id,
      ]);
      expect(await reach(server, key, instance.id, '203.0.113.9', 5432)).toEqual(['deny', 'default', null]);

      const deny = await createRule(server, key, {
        name: 'block-one',
        action: 'deny',
        protocol: 'all',
        ports: undefined,
        sources: ['198.51.100.7'],
        priority: 100,
      });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'rule', deny.id]);
      expect(await reach(server, key, instance.id, '198.51.100.8', 5432)).toEqual([
        'allow',
        'rule',
        allow.id,
      ]);
      // A user deny sits above the preset: SSH from that address is refused too.
      expect(await reach(server, key, instance.id, '198.51.100.7', 22)).toEqual(['deny', 'rule', deny.id]);

      // Raise the allow above the deny: it decides again. Disable it: the deny is back.
      await server.request('PATCH', `/v1/firewall/rules/${allow.id}`, { key, body: { priority: 50 } });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual([
        'allow',
        'rule',
        allow.id,
      ]);
      await server.request('PATCH', `/v1/firewall/rules/${allow.id}`, { key, body: { enabled: false } });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'rule', deny.id]);

      // A rule in another region does not apply.
      await createRule(server, key, { name: 'west', ports: '5432', priority: 1, region: 'us-west-2' });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'rule', deny.id]);

      // A user deny of the private network overrides the private default.
      const fence = await createRule(server, key, {
        name: 'fence',
        action: 'deny',
        ports: '6379',
        sources: ['10.10.0.0/16'],
      });
      expect(await reach(server, key, instance.id, '10.10.0.9', 6379)).toEqual(['deny', 'rule', fence.id]);
      expect(await reach(server, key, instance.id, '10.10.0.9', 6380)).toEqual(['allow', 'default', null]);
    });

    it('port ranges, IPv6 blocks and outbound denies', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const range = await createRule(server, key, {
        name: 'range',
        ports: '8000-8100',
        sources: ['2001:db8::/32'],
      });
      expect(await reach(server, key, instance.id, '2001:db8:ffff::1', 8000)).toEqual([
        'allow',
        'rule',
        range.id,
      ]);
      expect(await reach(server, key, instance.id, '2001:db8:ffff::1', 8100)).toEqual([
        'allow',
        'rule',
        range.id,
      ]);
      expect(await reach(server, key, instance.id, '2001:db8:ffff::1', 8101)).toEqual([
        'deny',
        'default',
        null,
      ]);
      expect(await reach(server, key, instance.id, '2001:db9::1', 8050)).toEqual(['deny', 'default', null]);

      const smtp = await createRule(server, key, {
        name: 'no-smtp',
        direction: 'outbound',
        action: 'deny',
        ports: '25',
        sources: undefined,
      });
      const out = (port: number) =>
        check(server, key, instance.id, {
          direction: 'outbound',
          protocol: 'tcp',
          port,
          address: '192.0.2.25',
        });
      expect(await out(25)).toMatchObject({ verdict: 'deny', matched_rule: { id: smtp.id, source: 'rule' } });
      expect(await out(587)).toMatchObject({ verdict: 'allow', matched_rule: { source: 'default' } });
    });
  });

  describe('targets and presets', () => {
    it('a tag selector follows the instance’s tags as they change', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const other = await createInstance(server, key, { tags: { role: 'db' } });
      const rule = await createRule(server, key, {
        name: 'db',
        ports: '5432',
        targets: { tags: { role: 'db' } },
      });
      const listFor = async (id: string) =>
        (await server.request('GET', `/v1/firewall/rules?instance_id=${id}`, { key })).body.data.map(
          (r: Json) => r.id,
        );

      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'default', null]);
      expect(await reach(server, key, other.id, '198.51.100.7', 5432)).toEqual(['allow', 'rule', rule.id]);
      expect(await listFor(instance.id)).toEqual([]);

      const tag = (tags: Json) =>
        server.request('PATCH', `/v1/instances/${instance.id}`, { key, body: { tags } });
      expect((await tag({ role: 'db', env: 'prod' })).status).toBe(200);
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['allow', 'rule', rule.id]);
      expect(await listFor(instance.id)).toEqual([rule.id]);

      await tag({ role: 'web' });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['deny', 'default', null]);
      expect(await listFor(instance.id)).toEqual([]);

      // Named by id, it applies whatever the tags.
      await server.request('PATCH', `/v1/firewall/rules/${rule.id}`, {
        key,
        body: { targets: { instance_ids: [instance.id] } },
      });
      expect(await reach(server, key, instance.id, '198.51.100.7', 5432)).toEqual(['allow', 'rule', rule.id]);
      expect(await reach(server, key, other.id, '198.51.100.7', 5432)).toEqual(['deny', 'default', null]);
    });

    it('PATCH firewall_preset changes the implicit rules (instance.updated) and /network lists them in order', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key);
      const rule = await createRule(server, key, { name: 'pg', ports: '5432', priority: 7 });
      expect(await reach(server, key, instance.id, '203.0.113.9', 80)).toEqual(['deny', 'default', null]);

      const web = await server.request('PATCH', `/v1/instances/${instance.id}`, {
        key,
        body: { firewall_preset: 'web' },
      });
      expect(web.status, web.text).toBe(200);
      expect(web.body.data.firewall_preset).toBe('web');
      expect(await reach(server, key, instance.id, '203.0.113.9', 80)).toEqual(['allow', 'preset', null]);
      expect(await reach(server, key, instance.id, '203.0.113.9', 443)).toEqual(['allow', 'preset', null]);

      const network = await server.request('GET', `/v1/instances/${instance.id}/network`, { key });
      expect(network.status, network.text).toBe(200);
      const rules = network.body.data.firewall_rules as Json[];
      expect(rules.map((r) => [r.source, r.ports, r.action, r.direction])).toEqual([
        ['rule', '5432', 'allow', 'inbound'],
        ['preset', '22', 'allow', 'inbound'],
        ['preset', '80', 'allow', 'inbound'],
        ['preset', '443', 'allow', 'inbound'],
        ['default', null, 'allow', 'inbound'],
        ['default', null, 'deny', 'inbound'],
        ['default', null, 'allow', 'outbound'],
      ]);
      expect(rules[0]).toMatchObject({ id: rule.id, priority: 7, sources: ['198.51.100.0/24'] });
      expect(rules[4]).toMatchObject({ sources: ['10.10.0.0/16'], protocol: 'all' });

      await server.request('PATCH', `/v1/instances/${instance.id}`, {
        key,
        body: { firewall_preset: 'none' },
      });
      expect(await reach(server, key, instance.id, '203.0.113.9', 22)).toEqual(['deny', 'default', null]);
      await server.request('PATCH', `/v1/instances/${instance.id}`, {
        key,
        body: { firewall_preset: 'allow-all' },
      });
      expect(await reach(server, key, instance.id, '203.0.113.9', 9999)).toEqual(['allow', 'preset', null]);
      expectInvalid(
        await server.request('PATCH', `/v1/instances/${instance.id}`, {
          key,
          body: { firewall_preset: 'open' },
        }),
        'firewall_preset',
      );

      const events = await server.request(
        'GET',
        `/v1/events?resource_id=${instance.id}&type=instance.updated`,
        {
          key,
        },
      );
      expect(events.body.data.map((e: Json) => e.data.changed)).toContainEqual(['firewall_preset']);
    });
  });

  describe('other accounts', () => {
    it('their rules and instances are 404 everywhere, naming the field where a body or query names them', async () => {
      const owner = await account(server);
      const stranger = await account(server);
      const instance = await createInstance(server, owner.key);
      const rule = await createRule(server, owner.key, { targets: { instance_ids: [instance.id] } });
      for (const [method, path, body] of [
        ['GET', `/v1/firewall/rules/${rule.id}`],
        ['PATCH', `/v1/firewall/rules/${rule.id}`, { priority: 1 }],
        ['DELETE', `/v1/firewall/rules/${rule.id}`],
        ['GET', `/v1/instances/${instance.id}/network`],
        ['GET', `/v1/instances/${instance.id}/network/check?protocol=tcp&port=22&address=198.51.100.7`],
      ] as [string, string, Json?][]) {
        const reply = await server.request(method, path, { key: stranger.key, ...(body ? { body } : {}) });
        expectError(reply, 404, 'not_found');
      }
      const steal = await server.request('POST', '/v1/firewall/rules', {
        key: stranger.key,
        body: { ...SSH_FROM_OFFICE, targets: { instance_ids: [instance.id] } },
      });
      expect(expectError(steal, 404, 'not_found').details).toMatchObject({
        resource: 'instance',
        id: instance.id,
        field: 'targets.instance_ids',
      });
      const mine = await createRule(server, stranger.key, {});
      const retarget = await server.request('PATCH', `/v1/firewall/rules/${mine.id}`, {
        key: stranger.key,
        body: { targets: { instance_ids: [instance.id] } },
      });
      expect(expectError(retarget, 404, 'not_found').details?.field).toBe('targets.instance_ids');
      const filtered = await server.request('GET', `/v1/firewall/rules?instance_id=${instance.id}`, {
        key: stranger.key,
      });
      expect(expectError(filtered, 404, 'not_found').details?.field).toBe('instance_id');
      // The stranger's own list holds only its rule; the owner's rule is untouched.
      const list = await server.request('GET', '/v1/firewall/rules', { key: stranger.key });
      expect(list.body.data.map((r: Json) => r.id)).toEqual([mine.id]);
      const still = await server.request('GET', `/v1/firewall/rules/${rule.id}`, { key: owner.key });
      expect(still.body.data).toEqual(rule);
      // A rule in one account never applies to another account's instances.
      const theirs = await createInstance(server, stranger.key);
      await createRule(server, owner.key, { name: 'all-of-region', ports: '5432' });
      expect(await reach(server, stranger.key, theirs.id, '198.51.100.7', 5432)).toEqual([
        'deny',
        'default',
        null,
      ]);
    });
  });

  describe('quota', () => {
    it('firewall_rules is counted and enforced (403 quota_exceeded), and a delete makes room', async () => {
      const owner = await account(server, 'free');
      await server.admin('set-quota', '--account', owner.id, '--name', 'firewall_rules', '--limit', '2');
      const first = await createRule(server, owner.key, { name: 'one' });
      await createRule(server, owner.key, { name: 'two' });
      const third = await server.request('POST', '/v1/firewall/rules', {
        key: owner.key,
        body: { ...SSH_FROM_OFFICE, name: 'three' },
      });
      expect(expectError(third, 403, 'quota_exceeded').details).toMatchObject({
        quota: 'firewall_rules',
        limit: 2,
        used: 2,
        requested: 1,
      });
      const quota = await server.request('GET', '/v1/account/quota', { key: owner.key });
      expect(quota.body.data).toContainEqual({ name: 'firewall_rules', limit: 2, used: 2 });
      await server.request('DELETE', `/v1/firewall/rules/${first.id}`, { key: owner.key });
      await createRule(server, owner.key, { name: 'three' });
    });

    it('concurrent creates never pass the limit', async () => {
      const owner = await account(server);
      await server.admin('set-quota', '--account', owner.id, '--name', 'firewall_rules', '--limit', '3');
      const replies = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          server.request('POST', '/v1/firewall/rules', {
            key: owner.key,
            body: { ...SSH_FROM_OFFICE, name: `r${i}` },
          }),
        ),
      );
      expect(replies.filter((r) => r.status === 201)).toHaveLength(3);
      expect(replies.filter((r) => r.status === 403)).toHaveLength(5);
    });
  });

  describe('lists', () => {
    it('filter by direction, protocol, region, enabled and instance_id; sort by priority, created_at, name', async () => {
      const { key } = await account(server);
      const instance = await createInstance(server, key, { tags: { role: 'web' } });
      const a = await createRule(server, key, { name: 'c-ssh', priority: 30 });
      const b = await createRule(server, key, {
        name: 'a-out',
        direction: 'outbound',
        protocol: 'udp',
        ports: '53',
        sources: undefined,
        priority: 10,
      });
      const c = await createRule(server, key, {
        name: 'b-icmp',
        protocol: 'icmp',
        ports: undefined,
        enabled: false,
        priority: 20,
        targets: { tags: { role: 'web' } },
      });
      const d = await createRule(server, key, { name: 'd-west', region: 'us-west-2', priority: 5 });
      const e = await createRule(server, key, { name: 'e-other', targets: { tags: { role: 'db' } } });
      const ids = async (query: string) => {
        const reply = await server.request('GET', `/v1/firewall/rules?${query}`, { key });
        expect(reply.status, reply.text).toBe(200);
        return reply.body.data.map((r: Json) => r.id);
      };
      expect(await ids('')).toEqual([e.id, d.id, c.id, b.id, a.id]);
      expect(await ids('sort=priority&order=asc')).toEqual([d.id, b.id, c.id, a.id, e.id]);
      expect(await ids('sort=name&order=asc')).toEqual([b.id, c.id, a.id, d.id, e.id]);
      expect(await ids('sort=created_at&order=asc')).toEqual([a.id, b.id, c.id, d.id, e.id]);
      expect(await ids('direction=outbound')).toEqual([b.id]);
      expect(await ids('protocol=icmp')).toEqual([c.id]);
      expect(await ids('region=us-west-2')).toEqual([d.id]);
      expect(await ids('enabled=false')).toEqual([c.id]);
      expect(await ids(`instance_id=${instance.id}&sort=priority&order=asc`)).toEqual([b.id, c.id, a.id]);
      expect(await ids(`instance_id=${instance.id}&enabled=true&direction=inbound`)).toEqual([a.id]);
      const page = await server.request('GET', '/v1/firewall/rules?limit=2&page=2&sort=name&order=asc', {
        key,
      });
      expect(page.body.pagination).toMatchObject({ page: 2, limit: 2, total_items: 5, total_pages: 3 });
      expect(page.body.data.map((r: Json) => r.id)).toEqual([a.id, d.id]);
      expectInvalid(await server.request('GET', '/v1/firewall/rules?sort=ports', { key }), 'sort');
      expectInvalid(await server.request('GET', '/v1/firewall/rules?protocol=sctp', { key }), 'protocol');
      expectInvalid(await server.request('GET', '/v1/firewall/rules?enabled=maybe', { key }), 'enabled');
    });
  });
});
