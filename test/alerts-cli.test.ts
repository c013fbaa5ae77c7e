/**
 * `nimbus alerts …` as a child process against the real HTTPS server (issue 21, item 5): create metric
 * and state policies from flags, list (table and JSON equal to the API's data), get, update (a channel
 * option replaces that kind only), test (a real SMTP relay and HTTPS receiver get the messages), the
 * incidents of a policy that fires (1 s collections, a boot that fails), delete, and the exit codes of
 * usage mistakes (2), API refusals (1) and a missing policy (4).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cli, cliFor, ensureBuilt, expectErrorLine } from './helpers/cli.js';
import { account, waitFor } from './helpers/common.js';
import { serverForSuite } from './helpers/server.js';
import { type SmtpRelay, startSmtpRelay } from './helpers/smtp-relay.js';
import { type Receiver, startReceiver } from './helpers/webhook-receiver.js';

let relay: SmtpRelay;
let receiver: Receiver;
beforeAll(async () => {
  relay = await startSmtpRelay();
  receiver = await startReceiver();
});
afterAll(async () => {
  await relay?.close();
  await receiver?.close();
});

describe('nimbus alerts', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
      NIMBUS_WEBHOOK_ALLOW_PRIVATE: '1',
      get NIMBUS_WEBHOOK_CA_FILE() {
        return receiver.caFile;
      },
      get NIMBUS_SMTP_URL() {
        return relay.url;
      },
    },
  });
  let cli: Cli;

  beforeAll(async () => {
    ensureBuilt();
    cli = cliFor(server, (await account(server)).key);
  }, 180_000);

  it('creates, lists, gets, updates, tests and deletes policies', async () => {
    const hot = await cli.json(
      'alerts',
      'create',
      'High CPU',
      '--metric',
      'cpu_percent',
      '--above',
      '80',
      '--window',
      '5m',
      '--tag',
      'env=prod',
      '--email',
      'oncall@example.com',
      '--slack',
      `${receiver.origin}/cli-slack`,
    );
    expect(hot).toMatchObject({
      id: expect.stringMatching(/^alr_/),
      name: 'High CPU',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '5m',
      targets: { instance_ids: [], tags: { env: 'prod' } },
      channels: {
        email: ['oncall@example.com'],
        webhook_ids: [],
        chat: [{ url: `${receiver.origin}/cli-slack`, format: 'slack' }],
      },
      enabled: true,
    });
    const stuck = await cli.json(
      'alerts',
      'create',
      'Stuck',
      '--state',
      'stuck',
      '--window',
      '10m',
      '--chat',
      `${receiver.origin}/cli-generic`,
      '--disabled',
    );
    expect(stuck).toMatchObject({ state: 'stuck', window: '10m', enabled: false, metric: null });

    const table = await cli.run('alerts', 'list');
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/ID\s+NAME\s+CONDITION\s+TARGETS\s+CHANNELS\s+ENABLED/);
    expect(table.stdout).toContain('cpu_percent above 80 over 5m');
    expect(table.stdout).toContain('env=prod');
    expect(table.stdout).toContain('1 e-mail, 1 chat');
    expect(table.stdout).toContain('stuck for 10m');
    const listed = await cli.json<{ id: string }[]>('alerts', 'list', '--sort', 'name', '--order', 'asc');
    const api = await server.request('GET', '/v1/alerts?sort=name&order=asc', {
      key: cli.env.NIMBUS_API_KEY,
    });
    expect(listed).toEqual(api.body.data);
    expect((await cli.json('alerts', 'get', hot.id)).name).toBe('High CPU');

    // --above changes the threshold; --email replaces the addresses and keeps the chat channel.
    const updated = await cli.json(
      'alerts',
      'update',
      hot.id,
      '--above',
      '90',
      '--email',
      'lead@example.com',
    );
    expect(updated).toMatchObject({
      threshold: 90,
      compare: 'above',
      channels: { email: ['lead@example.com'], chat: [{ format: 'slack' }] },
    });

    const tested = await cli.run('alerts', 'test', hot.id);
    expect(tested.code, tested.stderr).toBe(0);
    expect(tested.stdout).toMatch(/CHANNEL\s+TARGET\s+STATUS/);
    expect(tested.stdout.match(/succeeded/g)).toHaveLength(2);
    expect(relay.to('lead@example.com').map((m) => m.mail.subject)).toEqual([
      '[TEST] High CPU — test notification',
    ]);
    expect(JSON.parse(receiver.receivedAt('/cli-slack')[0]?.body ?? '{}').text).toContain('TEST: High CPU');

    expect((await cli.run('alerts', 'delete', stuck.id)).code).toBe(0);
    expectErrorLine(await cli.run('alerts', 'get', stuck.id), 4, 'not_found');
  }, 180_000);

  it('lists the incidents of a policy that fires', async () => {
    const broken = await cli.json(
      'alerts',
      'create',
      'Broken',
      '--state',
      'error',
      '--chat',
      `${receiver.origin}/cli-broken`,
    );
    const instance = await cli.json(
      'instances',
      'create',
      'doomed',
      '--type',
      'compute-1x',
      '--region',
      'us-east-1',
      '--image',
      'ubuntu-24.04',
      '--tag',
      'nimbus.sim/fault=boot-error',
    );
    const incidents = await waitFor(
      'an incident',
      async () => {
        const found = await cli.json<{ instance_id: string; status: string }[]>(
          'alerts',
          'incidents',
          broken.id,
          '--status',
          'firing',
        );
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    expect(incidents).toMatchObject([{ instance_id: instance.id, status: 'firing' }]);
    const wide = await cli.run('alerts', 'incidents', '-o', 'wide');
    expect(wide.stdout).toMatch(/ID\s+POLICY\s+INSTANCE\s+STATUS/);
    expect(wide.stdout).toContain('doomed');
    // The notifier's job is made due with the incident; 30 s allows for a loaded CI host.
    await waitFor('the chat post', () => (receiver.receivedAt('/cli-broken').length > 0 ? true : undefined), {
      timeoutMs: 30_000,
    });
    expect(wide.code).toBe(0);
  }, 180_000);

  it('usage mistakes exit 2, API refusals exit 1', async () => {
    const both = await cli.run(
      'alerts',
      'create',
      'x',
      '--metric',
      'cpu_percent',
      '--above',
      '1',
      '--below',
      '2',
    );
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--above or --below, not both');
    expect((await cli.run('alerts', 'create', 'x', '--window', '2m', '--state', 'stuck')).code).toBe(2);
    expect((await cli.run('alerts', 'update', 'alr_00000000000000000000000000')).code).toBe(2);
    const range = await cli.run(
      'alerts',
      'create',
      'x',
      '--metric',
      'cpu_percent',
      '--above',
      '101',
      '--window',
      '5m',
      '--email',
      'a@example.com',
    );
    expectErrorLine(range, 1, 'invalid_request');
    expect(range.stderr).toContain('threshold');
  }, 180_000);
});
