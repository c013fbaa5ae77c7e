/**
 * VPNs: WireGuard gateways into the account's private network of one region, and their peers (the
 * clients). Each request checks what is particular to VPNs (quota, tunnel and route blocks, the gateway's
 * public address, peer keys and addresses) and leaves the rest to the lifecycle core: the status check
 * against the state table (resources/vpns/states.ts), the version-guarded write, the event and the reconcile
 * job, in one transaction. The reconciler (vpn-reconciler.ts) brings the gateway up, loads peer changes
 * into it, and takes it down.
 *
 * Keys: the gateway's private key is made here and kept only sealed (secret-box.ts); a peer either sends
 * its public key (nothing secret leaves the server) or asks for a generated pair, whose private key is in
 * the answer to that request and nowhere else — it is never stored.
 *
 * Lock order: the account, then the VPN (peers are written while their VPN is held).
 */

import type { ComputeDriver } from '../../drivers/driver.js';
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import type { Page, PageRequest } from '../../platform/domain/pagination.js';
import {
  Conflict,
  InvalidRequest,
  NotFound,
  PaymentRequired,
  ServiceUnavailable,
} from '../../platform/errors.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { Lifecycle } from '../../platform/lifecycle/lifecycle.js';
import type { Principal } from '../../platform/principal.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { Store } from '../../platform/store/db.js';
import type { Executor } from '../../platform/store/schema.js';
import { lockAccount } from '../account/store.js';
import { takeAddress } from '../addresses/address-store.js';
import { parseCidr } from '../addresses/addresses.js';
import { publicAddressScope } from '../addresses/public-ip-store.js';
import { sealedKeyBinding, VPN_KIND } from './kind.js';
import {
  allowedCidrsProblem,
  cutsIntoTunnel,
  DEFAULT_TUNNEL_CIDR,
  gatewayAddress,
  lowestFreePeerAddress,
  PERSISTENT_KEEPALIVE_SECONDS,
  type PeerSort,
  routesOf,
  tunnelProblem,
  VPN_PORT,
  type Vpn,
  type VpnPeer,
  type VpnSort,
} from './record.js';
import * as vpns from './store.js';
import { type PEER_STATS, type PeerView, peerRecordView, peerView, type VpnView, vpnView } from './view.js';
import { generateKeyPair, isWireGuardKey, renderClientConfig } from './wireguard.js';

export interface NewVpn {
  name: string;
  region: string;
  tunnel_cidr?: string | undefined;
  allowed_cidrs?: string[] | undefined;
}

export interface VpnUpdate {
  name?: string | undefined;
  allowed_cidrs?: string[] | undefined;
}

export interface VpnListQuery extends PageRequest<VpnSort> {
  status?: string | undefined;
  region?: string | undefined;
}

export interface NewPeer {
  name: string;
  /** The peer's own key; absent: the server generates a pair and shows the private key once. */
  public_key?: string | undefined;
}

/** The answer to adding a peer: the peer, its wg-quick file and, for a generated key, its private key. */
export interface CreatedPeerView extends Omit<PeerView, (typeof PEER_STATS)[number]> {
  config: string;
  private_key?: string;
}

export interface PeerConfigView {
  peer_id: string;
  vpn_id: string;
  private_key_included: false;
  config: string;
}

/** A peer's wg-quick file: with its private key (only when just generated) or the placeholder. */
function clientConfig(vpn: Vpn, peer: VpnPeer, privateKey: string | null): string {
  return renderClientConfig({
    privateKey,
    address: peer.address,
    dns: gatewayAddress(vpn.tunnel_cidr),
    serverPublicKey: vpn.server_public_key,
    endpoint: { ip: vpn.endpoint_ip, port: vpn.endpoint_port },
    allowedIps: [vpn.tunnel_cidr, ...routesOf(vpn)],
    keepaliveSeconds: PERSISTENT_KEEPALIVE_SECONDS,
  });
}

export class VpnService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly lifecycle: Lifecycle,
    private readonly secretBox: SecretBox,
    /** Each region's public IPv4 pool (NIMBUS_PUBLIC_IP_POOLS), shared with instances. */
    private readonly publicIpPools: Record<string, string>,
    /** The gateways' own figures for their peers (last handshake, bytes): the real gateway's or the simulator's. */
    private readonly gateways: Pick<ComputeDriver, 'gatewayPeers'>,
  ) {}

  async create(principal: Principal, input: NewVpn): Promise<VpnView> {
    const tunnel = input.tunnel_cidr ?? DEFAULT_TUNNEL_CIDR;
    const allowed = input.allowed_cidrs ?? [];
    checkBlocks(input.region, tunnel, allowed, input.tunnel_cidr !== undefined);
    if (principal.accountStatus === 'past_due') {
      throw new PaymentRequired(
        'This account is past due: you cannot create VPNs until it is settled. Reading and deleting still work.',
      );
    }
    const accountId = principal.accountId;
    const keys = generateKeyPair();
    const vpn = await this.lifecycle.create(VPN_KIND, {
      event: 'vpn.created',
      accountId,
      // Counted over the account's rows, under its lock: of two creates the second counts the first.
      quotas: [['vpns', 1]],
      hold: (ctx) => lockAccount(ctx.trx, accountId),
      build: async (ctx): Promise<Vpn> => {
        const endpointIp = await this.allocateEndpoint(ctx.trx, input.region);
        const now = this.clock.now();
        const at = now.toISOString();
        const id = newId('vpn', now);
        return {
          id,
          account_id: accountId,
          name: input.name,
          region: input.region,
          status: VPN_KIND.table.create.status,
          endpoint_ip: endpointIp,
          endpoint_port: VPN_PORT,
          server_public_key: keys.publicKey,
          server_private_key_sealed: this.secretBox.seal(keys.privateKey, sealedKeyBinding(id)),
          tunnel_cidr: tunnel,
          allowed_cidrs: allowed,
          version: 1,
          created_at: at,
          updated_at: at,
        };
      },
    });
    return vpnView(vpn);
  }

  async list(accountId: string, query: VpnListQuery): Promise<Page<VpnView>> {
    const page = await vpns.listVpns(
      this.store.db,
      accountId,
      { status: query.status, region: query.region },
      query,
    );
    return { items: page.items.map(vpnView), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<VpnView> {
    return vpnView(await this.find(this.store.db, accountId, id));
  }

  async update(accountId: string, id: string, changes: VpnUpdate): Promise<VpnView> {
    if (changes.allowed_cidrs !== undefined) checkAllowed(changes.allowed_cidrs);
    const updated = await this.lifecycle.act(VPN_KIND, accountId, id, 'update', (vpn) => {
      if (changes.allowed_cidrs !== undefined)
        checkRoutesAgainstTunnel(changes.allowed_cidrs, vpn.tunnel_cidr);
      return {
        changes: {
          ...(changes.name !== undefined ? { name: changes.name } : {}),
          ...(changes.allowed_cidrs !== undefined ? { allowed_cidrs: changes.allowed_cidrs } : {}),
        },
      };
    });
    return vpnView(updated);
  }

  async delete(accountId: string, id: string): Promise<VpnView> {
    return vpnView(await this.lifecycle.act(VPN_KIND, accountId, id, 'delete', () => ({})));
  }

  async addPeer(accountId: string, vpnId: string, input: NewPeer): Promise<CreatedPeerView> {
    if (input.public_key !== undefined && !isWireGuardKey(input.public_key)) {
      throw new InvalidRequest(
        'public_key must be a WireGuard public key: 32 bytes in base64, as `wg pubkey` prints it',
        { field: 'public_key', value: input.public_key },
      );
    }
    const generated = input.public_key === undefined ? generateKeyPair() : null;
    const publicKey = input.public_key ?? (generated?.publicKey as string);
    let peer: VpnPeer | undefined;
    const vpn = await this.lifecycle.act(VPN_KIND, accountId, vpnId, 'add_peer', async (current, ctx) => {
      if (publicKey === current.server_public_key) {
        throw new InvalidRequest("public_key is the gateway's own key; send the client's public key", {
          field: 'public_key',
          value: publicKey,
        });
      }
      const existing = await vpns.peersOf(ctx.trx, current.id);
      const same = existing.find((p) => p.public_key === publicKey);
      if (same) {
        throw new Conflict(`VPN ${current.id} already has a peer with this public key (${same.id})`, {
          peer_id: same.id,
        });
      }
      const address = lowestFreePeerAddress(
        current.tunnel_cidr,
        existing.map((p) => p.address),
      );
      if (!address) {
        throw new Conflict(
          `The tunnel network ${current.tunnel_cidr} of VPN ${current.id} has no free address left; remove a peer first`,
          { tunnel_cidr: current.tunnel_cidr, peers: existing.length },
        );
      }
      const now = this.clock.now();
      peer = {
        id: newId('vpnPeer', now),
        vpn_id: current.id,
        account_id: accountId,
        name: input.name,
        public_key: publicKey,
        address,
        key_generated: generated !== null,
        created_at: now.toISOString(),
      };
      await vpns.insertPeer(ctx.trx, peer);
      await recordCreated(ctx.trx, 'vpn_peer', peer.id);
      // The job loads the gateway's new configuration (it lists this peer now).
      return { reconcile: true, event: { type: 'vpn.peer_added', data: peerEventData(peer) } };
    });
    const added = peer as VpnPeer;
    return {
      ...peerRecordView(added),
      config: clientConfig(vpn, added, generated?.privateKey ?? null),
      ...(generated ? { private_key: generated.privateKey } : {}),
    };
  }

  async listPeers(accountId: string, vpnId: string, query: PageRequest<PeerSort>): Promise<Page<PeerView>> {
    await this.find(this.store.db, accountId, vpnId);
    const page = await vpns.listPeers(this.store.db, vpnId, query);
    const stats = await this.gateways.gatewayPeers(
      vpnId,
      page.items.map((peer) => peer.public_key),
    );
    return {
      items: page.items.map((peer) => peerView(peer, stats.get(peer.public_key))),
      pagination: page.pagination,
    };
  }

  async getPeer(accountId: string, vpnId: string, peerId: string): Promise<PeerView> {
    const { peer } = await this.findPeer(accountId, vpnId, peerId);
    const stats = await this.gateways.gatewayPeers(vpnId, [peer.public_key]);
    return peerView(peer, stats.get(peer.public_key));
  }

  async removePeer(accountId: string, vpnId: string, peerId: string): Promise<PeerView> {
    let removed: VpnPeer | undefined;
    await this.lifecycle.act(VPN_KIND, accountId, vpnId, 'remove_peer', async (vpn, ctx) => {
      const peer = await vpns.findPeer(ctx.trx, vpn.id, peerId);
      if (!peer) throw new NotFound('vpn_peer', peerId);
      await vpns.deletePeer(ctx.trx, vpn.id, peer.id);
      removed = peer;
      return { reconcile: true, event: { type: 'vpn.peer_removed', data: peerEventData(peer) } };
    });
    return peerView(removed as VpnPeer);
  }

  /** The peer's wg-quick file without its private key (the server never kept it): a placeholder instead. */
  async peerConfig(accountId: string, vpnId: string, peerId: string): Promise<PeerConfigView> {
    const { vpn, peer } = await this.findPeer(accountId, vpnId, peerId);
    return {
      peer_id: peer.id,
      vpn_id: vpn.id,
      private_key_included: false,
      config: clientConfig(vpn, peer, null),
    };
  }

  private async findPeer(accountId: string, vpnId: string, peerId: string) {
    const vpn = await this.find(this.store.db, accountId, vpnId);
    const peer = await vpns.findPeer(this.store.db, vpn.id, peerId);
    if (!peer) throw new NotFound('vpn_peer', peerId);
    return { vpn, peer };
  }

  private async find(db: Executor, accountId: string, id: string): Promise<Vpn> {
    const vpn = await vpns.findAccountVpn(db, accountId, id);
    if (!vpn) throw new NotFound('vpn', id);
    return vpn;
  }

  /** The gateway's public address: the lowest free one of the region's pool, instances' counted. */
  private async allocateEndpoint(trx: Executor, region: string): Promise<string> {
    const pool = this.publicIpPools[region];
    const ip = pool ? await takeAddress(trx, publicAddressScope(region, parseCidr(pool))) : null;
    if (!ip) {
      throw new ServiceUnavailable(`${region} has no public IPv4 address left; try another region or later`, {
        reason: 'insufficient_capacity',
        region,
        resource: 'public_ipv4',
      });
    }
    return ip;
  }
}

function peerEventData(peer: VpnPeer) {
  return {
    peer_id: peer.id,
    peer_name: peer.name,
    peer_address: peer.address,
    peer_public_key: peer.public_key,
  };
}

function checkBlocks(region: string, tunnel: string, allowed: readonly string[], tunnelGiven: boolean): void {
  checkAllowed(allowed);
  const problem = tunnelProblem(tunnel, region);
  if (problem) {
    // The default is clear of every region's private network; only a given block can be refused.
    throw new InvalidRequest(problem, { field: tunnelGiven ? 'tunnel_cidr' : 'region', value: tunnel });
  }
  checkRoutesAgainstTunnel(allowed, tunnel);
}

function checkAllowed(allowed: readonly string[]): void {
  const problem = allowedCidrsProblem(allowed);
  if (problem) {
    throw new InvalidRequest(problem.message, {
      field: `allowed_cidrs.${problem.index}`,
      value: allowed[problem.index],
    });
  }
}

function checkRoutesAgainstTunnel(allowed: readonly string[], tunnel: string): void {
  for (const [index, route] of allowed.entries()) {
    if (cutsIntoTunnel(route, tunnel)) {
      throw new InvalidRequest(
        `${route} overlaps part of the tunnel network ${tunnel}, whose addresses are the clients'`,
        { field: `allowed_cidrs.${index}`, value: route, tunnel_cidr: tunnel },
      );
    }
  }
}
