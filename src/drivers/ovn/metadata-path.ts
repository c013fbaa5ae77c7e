/**
 * The metadata service as a guest on OVN reaches it: `http://169.254.169.254/` is the VPC's host port
 * (network.ts), where this process listens inside the VPC's namespace (namespace-listener.ts). The caller
 * is the instance of that VPC holding the connection's source address: OVN's port security lets a
 * port send only from the MAC and private IP the store gave it, so the address names the guest, never a
 * header or an id the guest sends. A connection from an address no instance holds is answered 404.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import type { VpcInstance } from './vpcs.js';

/** Where a VPC is: the account and region its key names. */
export interface VpcPlace {
  accountId: string;
  region: string;
}

export type GuestRequestHandler = (
  instanceId: string,
  request: http.IncomingMessage,
  response: http.ServerResponse,
) => void;

export class VpcMetadataPath {
  private readonly callers = new WeakMap<Socket, string>();
  private readonly http: http.Server;
  private handler: GuestRequestHandler | null = null;

  constructor(
    /** The instance of the account in the region holding `privateIp`, or null. */
    private readonly instanceAt: (place: VpcPlace, privateIp: string) => Promise<VpcInstance | null>,
    private readonly onError: (error: unknown) => void,
  ) {
    this.http = http.createServer((request, response) => {
      const instanceId = this.callers.get(request.socket);
      if (!instanceId || !this.handler) {
        const body = instanceId ? 'metadata service starting\n' : 'No instance at this address\n';
        response.writeHead(instanceId ? 503 : 404, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
        return;
      }
      this.handler(instanceId, request, response);
    });
    // Guests ask a few items at boot; an idle connection is not kept for them.
    this.http.keepAliveTimeout = 1000;
    this.http.headersTimeout = 10_000;
    this.http.requestTimeout = 30_000;
  }

  setHandler(handler: GuestRequestHandler): void {
    this.handler = handler;
  }

  /** A connection that arrived on `place`'s host port: its caller looked up, then served as HTTP. */
  accept(place: VpcPlace, socket: Socket): void {
    socket.on('error', () => socket.destroy());
    const address = unmapped(socket.remoteAddress ?? '');
    this.instanceAt(place, address).then(
      (instance) => {
        if (instance) this.callers.set(socket, instance.id);
        this.http.emit('connection', socket);
      },
      (error: unknown) => {
        this.onError(error);
        socket.destroy();
      },
    );
  }

  close(): void {
    this.http.closeAllConnections();
  }
}

/** An IPv4 peer as a dual-stack socket shows it (`::ffff:10.10.0.5`) in its plain form. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}
