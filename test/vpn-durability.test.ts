/**
 * Restart safety of VPNs, on both stores: the real server as a child process (`bin/nimbus serve`) is
 * killed with SIGKILL while a gateway is provisioning and, later, while it is being destroyed; a new
 * process on the same data dir and database finds the job and the simulated gateway in the store, opens
 * the sealed key with the same master key, and takes the VPN where it was going, each event written once.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { SIM_GATEWAY_TIMINGS_MS, type SimGatewaysTable } from '../src/drivers/simulator/gateways.js';
import { STORES, storeForSuite } from './helpers/backends.js';
import { restartableServer, RESTART_STEP_TIMEOUT_MS as STEP_TIMEOUT_MS } from './helpers/child-server.js';
import { sleep } from './helpers/common.js';
import { eventTypes } from './helpers/instances.js';

/** Provisioning 3 s, destroying 1.5 s: long enough to kill the server in the middle. */
const SPEEDUP = 2;
const PROVISION_MS = SIM_GATEWAY_TIMINGS_MS.provision / SPEEDUP;
const DESTROY_MS = SIM_GATEWAY_TIMINGS_MS.destroy / SPEEDUP;

describe.concurrent.each(STORES)('VPNs: kill -9 mid-change, then a new process (%s)', (store) => {
  const suite = storeForSuite(store, { dataDirPrefix: 'nimbus-vpn-durability-' });
  const server = restartableServer(suite, { env: { NIMBUS_SIM_SPEEDUP: String(SPEEDUP) } });
  const live = server.live;
  let key = '';
  let vpnId = '';

  /** SIGKILL, then what the dead process left in the store for the VPN. */
  function killNow() {
    return server.killAndRead([`vpn:${vpnId}`], async (db) => ({
      vpn: await db.selectFrom('vpns').select(['status']).where('id', '=', vpnId).executeTakeFirst(),
      gateway: await db
        .withTables<{ sim_gateways: SimGatewaysTable }>()
        .selectFrom('sim_gateways')
        .select(['state'])
        .where('id', '=', vpnId)
        .executeTakeFirst(),
    }));
  }

  const waitForVpn = (status: string, timeoutMs: number) =>
    server.waitForStatus(`/v1/vpn/${vpnId}`, status, timeoutMs);

  beforeAll(async () => {
    await server.start();
    key = live().rootKey;
  }, STEP_TIMEOUT_MS);

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

      const { left, jobs } = await killNow();
      expect(left.vpn).toEqual({ status: 'provisioning' });
      expect(left.gateway).toEqual({ state: 'provisioning' });
      expect(jobs[0], 'the reconcile job is in the store').toBeDefined();

      await server.start();
      await waitForVpn('active', PROVISION_MS + 10_000);
      // The new process opens the sealed key (same master key file): it hands peers to the gateway.
      const peer = await live().request('POST', `/v1/vpn/${vpnId}/peers`, { key, body: { name: 'after' } });
      expect(peer.status, peer.text).toBe(201);
      expect(await eventTypes(live(), key, vpnId)).toEqual(['vpn.created', 'vpn.active', 'vpn.peer_added']);
    },
    STEP_TIMEOUT_MS,
  );

  it.sequential(
    'deleting: killed while the gateway goes, the next process removes the VPN',
    async () => {
      const reply = await live().request('DELETE', `/v1/vpn/${vpnId}`, { key });
      expect(reply.status, reply.text).toBe(202);
      await sleep(DESTROY_MS / 4);

      const { left } = await killNow();
      expect(left.vpn).toEqual({ status: 'deleting' });
      expect(left.gateway).toEqual({ state: 'deleting' });

      await server.start();
      await waitForVpn('gone', DESTROY_MS + 10_000);
      expect(await eventTypes(live(), key, vpnId)).toEqual([
        'vpn.created',
        'vpn.active',
        'vpn.peer_added',
        'vpn.deleted',
      ]);
    },
    STEP_TIMEOUT_MS,
  );
});
