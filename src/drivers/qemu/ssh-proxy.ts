/**
 * The forwarded SSH port of each VM, with the instance's firewall in front of it.
 *
 * QEMU forwards the guest's port 22 to a port on loopback only (a new one at each boot). Nimbus listens on
 * the instance's public SSH port (NIMBUS_HOST, NIMBUS_QEMU_SSH_PORTS) and asks, for every connection, the
 * same evaluator as `GET /v1/instances/{id}/network/check` whether an inbound TCP packet to port 22 from
 * that client's address is allowed; allowed connections are piped to QEMU's port, others are closed at
 * once. So the firewall decides real traffic, per source address, which QEMU's own forward could not.
 *
 * With NIMBUS_NETWORK=ovn there is no QEMU forward: the connection goes to the guest's private address
 * from the VPC's host namespace (drivers/ovn/network.ts), the same way.
 *
 * The listeners live in the server process: while Nimbus is down the VMs run on but cannot be reached
 * over SSH; the restarted server listens again (drivers/qemu/qemu.ts `serve`).
 */
import net from 'node:net';
import type { Duplex } from 'node:stream';

/** Whether an inbound TCP connection to `port` of the instance from `address` is allowed. */
export type InboundCheck = (instanceId: string, port: number, address: string) => Promise<boolean>;

interface Listener {
  server: net.Server;
  sockets: Set<net.Socket>;
}

export class SshProxies {
  private readonly listeners = new Map<string, Listener>();
  private check: InboundCheck = async () => true;

  setCheck(check: InboundCheck): void {
    this.check = check;
  }

  /**
   * Listens on host:port for the instance (once; again after a restart). `connect` opens a stream to the
   * guest's port 22 (null: the VM is not running).
   */
  async open(
    instanceId: string,
    host: string,
    port: number,
    connect: () => Promise<Duplex | null>,
  ): Promise<void> {
    if (this.listeners.has(instanceId)) return;
    const sockets = new Set<net.Socket>();
    const server = net.createServer((client) => {
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      client.on('error', () => client.destroy());
      client.pause();
      void this.pipe(instanceId, client, connect);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => resolve());
    });
    this.listeners.set(instanceId, { server, sockets });
  }

  private async pipe(
    instanceId: string,
    client: net.Socket,
    connect: () => Promise<Duplex | null>,
  ): Promise<void> {
    const address = (client.remoteAddress ?? '').replace(/^::ffff:/, '');
    let upstream: Duplex | null = null;
    try {
      if (address !== '' && (await this.check(instanceId, 22, address)) && !client.destroyed) {
        upstream = await connect();
      }
    } catch {
      upstream = null;
    }
    if (upstream === null || client.destroyed) {
      upstream?.destroy();
      client.destroy();
      return;
    }
    const to = upstream;
    to.on('error', () => client.destroy());
    client.on('close', () => to.destroy());
    to.on('close', () => client.destroy());
    client.pipe(to);
    to.pipe(client);
    client.resume();
  }

  async close(instanceId: string): Promise<void> {
    const listener = this.listeners.get(instanceId);
    if (!listener) return;
    this.listeners.delete(instanceId);
    for (const socket of listener.sockets) socket.destroy();
    await new Promise<void>((resolve) => listener.server.close(() => resolve()));
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.listeners.keys()].map((id) => this.close(id)));
  }
}
