/**
 * A TCP listening socket inside another network namespace, served by this process. A process cannot
 * bind in a namespace it is not in, and moving the whole server into one is not possible (each VPC
 * has its own), so a short-lived Node child started under `ip netns exec` binds the socket there and
 * hands it over on its IPC channel; the socket keeps its namespace for the rest of its life, and the
 * child exits. Connections then arrive here with their real peer address, which is what identifies a
 * guest (its port-secured private address in that VPC).
 */
import { spawn } from 'node:child_process';
import type { Server } from 'node:net';

/** Runs in the namespace: binds, sends the listening server to the parent, and exits. */
const BINDER = `
const net = require('node:net');
const [host, port] = process.argv.slice(-2);
const server = net.createServer();
server.once('error', (error) => {
  process.send({ error: String(error.code || error.message) }, () => process.exit(1));
});
server.listen({ host, port: Number(port), exclusive: true }, () => {
  process.send({ listening: true }, server, () => process.exit(0));
});
`;

const HANDOVER_TIMEOUT_MS = 15_000;

/** Listens on `host`:`port` inside `namespace` (`/run/netns/<namespace>`); resolves to the listening server. */
export function listenInNamespace(namespace: string, host: string, port: number): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const child = spawn(
      'ip',
      ['netns', 'exec', namespace, process.execPath, '-e', BINDER, '--', host, String(port)],
      { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      settle(() =>
        reject(new Error(`binding ${host}:${port} in ${namespace}: no answer in ${HANDOVER_TIMEOUT_MS} ms`)),
      );
    }, HANDOVER_TIMEOUT_MS);
    child.on('message', (message: { listening?: true; error?: string }, handle: unknown) => {
      if (message.listening && handle) settle(() => resolve(handle as Server));
      else
        settle(() =>
          reject(new Error(`binding ${host}:${port} in ${namespace}: ${message.error ?? 'no socket'}`)),
        );
    });
    child.on('error', (error) => settle(() => reject(error)));
    child.on('exit', (code) => {
      settle(() =>
        reject(
          new Error(`binding ${host}:${port} in ${namespace}: the binder exited (${code}) ${stderr.trim()}`),
        ),
      );
    });
  });
}
