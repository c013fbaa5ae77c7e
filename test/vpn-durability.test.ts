/**
 * Restart safety of VPNs, on both stores: the real server as a child process (`bin/nimbus serve`) is
 * killed with SIGKILL while a gateway is provisioning and, later, while it is being destroyed; a new
 * process on the same data dir and database finds the job and the simulated gateway in the store, opens
 * the sealed key with the same master key, and takes the VPN where it was going, each event written once.
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SIM_GATEWAY_TIMINGS_MS, type SimGatewaysTable } from '../src/drivers/simulator/gateways.js';
import { openStore } from '../src/platform/store/db.js';
import type { Database } from '../src/platform/store/schema.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { assertBuilt, type ChildServer, spawnServer } from './helpers/child-server.js';
import { waitFor as poll, sleep } from './helpers/common.js';

/** Provisioning 3 s, destroying 1.5 s: long enough to kill the server in the middle. */
const SPEEDUP = 2;
const PROVISION_MS = SIM_GATEWAY_TIMINGS_MS.provision / SPEEDUP;
const DESTROY_MS = SIM_GATEWAY_TIMINGS_MS.destroy / SPEEDUP;
/** The runner's default lease (src/platform/jobs/runner.ts), should a kill land inside one. */
const LEASE_MS = 30_000;
const STEP_TIMEOUT_MS = 60_000 + LEASE_MS;

beforeAll(() => {
  // bin/nimbus runs dist/: testing an old build would test old code.
  assertBuilt();
});

describe.concurrent.each(STORES)('VPNs: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-vpn-durability-' });
  const { dataDir } = suite;
  let server: ChildServer | null = null;
  let key = '';
  let leaseWaitMs = 0;
  let vpnId = '';

  async function start(): Promise<void> {
    server = await spawnServer({
      dataDir,
      databaseUrl: suite.databaseUrl,
      env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) },
    });
  }

  function live(): ChildServer {
    if (!server) throw new Error('no server is running');
    return server;
  }

  /** SIGKILL, then what the dead process left in the store for the VPN. */
  async function killNow() {
    await live().kill();
    server = null;
    const killedAt = Date.now();
    const opened = openStore({ databaseUrl: suite.databaseUrl, dataDir });
    try {
      const db = opened.db as Kysely<Database>;
      const left = {
        vpn: await db.selectFrom('vpns').select(['status']).where('id', '=', vpnId).executeTakeFirst(),
        gateway: await db
          .withTables<{ sim_gateways: SimGatewaysTable }>()
          .selectFrom('sim_gateways')
          .select(['state'])
          .where('id', '=', vpnId)
          .executeTakeFirst(),
        job: await db
          .selectFrom('jobs')
          .select(['lease_until'])
          .where('key', '=', `vpn:${vpnId}`)
          .executeTakeFirst(),
      };
      leaseWaitMs = left.job?.lease_until ? Math.max(0, Date.parse(left.job.lease_until) - killedAt) : 0;
      return left;
    } finally {
      await opened.close();
    }
  }

  async function waitForVpn(status: string, timeoutMs: number) {
    let last = '';
    return poll(
      `${vpnId} to become ${status}`,
      async () => {
        const reply = await live().request('GET', `/v1/vpn/${vpnId}`, { key });
        last = reply.status === 200 ? reply.body.data.status : `HTTP ${reply.status}`;
        if (status === 'gone') return reply.status === 404 ? {} : undefined;
        return last === status ? reply.body.data : undefined;
      },
      { timeoutMs: timeoutMs + leaseWaitMs, intervalMs: 50, lastSeen: () => `${last}\n${live().output()}` },
    );
  }

  async function eventTypes(): Promise<string[]> {
    const reply = await live().request('GET', `/v1/events?resource_id=${vpnId}&limit=100`, { key });
    expect(reply.status, reply.text).toBe(200);
    return (reply.body.data as { type: string }[]).map((e) => e.type).reverse();
  }

  beforeAll(async () => {
    await start();
    key = live().rootKey;
  }, STEP_TIMEOUT_MS);

  afterAll(async () => {
    await server?.kill();
  });

  it.sequential(
    'provisioning: killed while the gateway comes up, the next process makes the VPN active',
    async () => {
      const reply = await live().request('POST', '/v1/vpn', {
        key,
        body: { name: 'durable-vpn', region: 'us-east-1' },
      });
      expect(reply.status, reply.text).toBe(202);
      vpnId = reply.body.data.id;
      await sleep(PROVISION_MS / 4);

      const left = await killNow();
      expect(left.vpn).toEqual({ status: 'provisioning' });
      expect(left.gateway).toEqual({ state: 'provisioning' });
      expect(left.job, 'the reconcile job is in the store').toBeDefined();

      await start();
      await waitForVpn('active', PROVISION_MS + 10_000);
      // The new process opens the sealed key (same master key file): it hands peers to the gateway.
      const peer = await live().request('POST', `/v1/vpn/${vpnId}/peers`, { key, body: { name: 'after' } });
      expect(peer.status, peer.text).toBe(201);
      expect(await eventTypes()).toEqual(['vpn.created', 'vpn.active', 'vpn.peer_added']);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'deleting: killed while the gateway goes, the next process removes the VPN',
    async () => {
      const reply = await live().request('DELETE', `/v1/vpn/${vpnId}`, { key });
      expect(reply.status, reply.text).toBe(202);
      await sleep(DESTROY_MS / 4);

      const left = await killNow();
      expect(left.vpn).toEqual({ status: 'deleting' });
      expect(left.gateway).toEqual({ state: 'deleting' });

      await start();
      await waitForVpn('gone', DESTROY_MS + 10_000);
      expect(await eventTypes()).toEqual(['vpn.created', 'vpn.active', 'vpn.peer_added', 'vpn.deleted']);
    },
    STEP_TIMEOUT_MS,
  );
});
