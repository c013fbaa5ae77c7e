/**
 * A listening socket bound inside another network namespace and served by this process
 * (src/drivers/ovn/namespace-listener.ts): what the metadata path on OVN stands on. The suite makes its
 * own namespace (loopback only) and removes it at the end.
 */
import { execFile } from 'node:child_process';
import type { Server } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenInNamespace } from '../src/drivers/ovn/namespace-listener.js';
import { CAN_RUN_OVN, sh, succeeds } from './helpers/ovn.js';

const NAMESPACE = `nimbus-nl-${process.pid}`;

describe.runIf(CAN_RUN_OVN)('a listener in another network namespace', () => {
  const servers: Server[] = [];

  beforeAll(() => {
    sh('ip', ['netns', 'add', NAMESPACE]);
    sh('ip', ['netns', 'exec', NAMESPACE, 'ip', 'link', 'set', 'lo', 'up']);
  });

  afterAll(() => {
    for (const server of servers) server.close();
    succeeds('ip', ['netns', 'del', NAMESPACE]);
  });

  it('accepts connections made inside the namespace, with their peer address, and none from outside', async () => {
    const server = await listenInNamespace(NAMESPACE, '127.0.0.1', 8080);
    servers.push(server);
    const peers: string[] = [];
    server.on('connection', (socket) => {
      peers.push(String(socket.remoteAddress));
      socket.end('hello\n');
    });
    const { stdout } = await promisify(execFile)('ip', [
      'netns',
      'exec',
      NAMESPACE,
      'socat',
      '-u',
      'TCP:127.0.0.1:8080,connect-timeout=5',
      '-',
    ]);
    expect(stdout).toBe('hello\n');
    expect(peers).toEqual(['127.0.0.1']);
    // The root namespace's loopback is another one: nothing listens on its 8080 for this server.
    const outside = await promisify(execFile)('socat', [
      '-u',
      'TCP:127.0.0.1:8080,connect-timeout=2',
      '-',
    ]).then(
      () => 'connected',
      () => 'refused',
    );
    expect(outside === 'refused' || peers.length === 1).toBe(true);
    expect(peers).toHaveLength(1);
  });

  it('fails with the reason when the address is taken or the namespace does not exist', async () => {
    await expect(listenInNamespace(NAMESPACE, '127.0.0.1', 8080)).rejects.toThrow(/EADDRINUSE/);
    await expect(listenInNamespace(`${NAMESPACE}-missing`, '127.0.0.1', 8080)).rejects.toThrow(
      /the binder exited/,
    );
  });
});
