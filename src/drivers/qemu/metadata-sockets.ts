/**
 * The metadata service as each guest reaches it. QEMU's user-mode network forwards the guest's
 * connections to 169.254.169.254:80 (`guestfwd … cmd:socat`) to a unix socket of that VM alone,
 * `run/<instance id>.meta`; Nimbus serves HTTP there and knows the instance by the socket the connection
 * came in on, and hands the request over with that instance named: the guest never names itself.
 *
 * The requests go to the same metadata app as the simulator's TCP port (resources/instances/metadata-server.ts), handed over
 * by the composition root; until then, answers are 503.
 */

import { chmodSync, rmSync } from 'node:fs';
import http from 'node:http';

export type MetadataHandler = (
  instanceId: string,
  request: http.IncomingMessage,
  response: http.ServerResponse,
) => void;

export class MetadataSockets {
  private readonly servers = new Map<string, http.Server>();
  private handler: MetadataHandler | null = null;

  setHandler(handler: MetadataHandler): void {
    this.handler = handler;
  }

  /** Listens on the instance's socket (again, after a restart); one already open is left alone. */
  async open(instanceId: string, socketPath: string): Promise<void> {
    if (this.servers.has(instanceId)) return;
    const server = http.createServer((request, response) => {
      if (!this.handler) {
        response.writeHead(503, { 'content-type': 'text/plain' }).end('metadata service starting\n');
        return;
      }
      this.handler(instanceId, request, response);
    });
    server.keepAliveTimeout = 1000;
    rmSync(socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
    chmodSync(socketPath, 0o600);
    this.servers.set(instanceId, server);
  }

  async close(instanceId: string, socketPath?: string): Promise<void> {
    const server = this.servers.get(instanceId);
    this.servers.delete(instanceId);
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    if (socketPath) rmSync(socketPath, { force: true });
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.servers.keys()].map((id) => this.close(id)));
  }
}
