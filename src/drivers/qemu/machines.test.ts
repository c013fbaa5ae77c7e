/**
 * The choice of public SSH ports under concurrent provisions (bench/qemu-boot.mjs's eight creates at once
 * once gave four machines the same port, and all but one of them went into error).
 */
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { PortChooser } from './machines.js';

const listeners: net.Server[] = [];
afterAll(async () => {
  await Promise.all(listeners.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** A loopback port something listens on now (so a range around it exists on this host). */
async function listening(port = 0): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => resolve());
  });
  listeners.push(server);
  return (server.address() as net.AddressInfo).port;
}

describe('PortChooser', () => {
  it('gives eight concurrent provisions eight different ports, none taken by a record or a listener', async () => {
    const busy = await listening();
    const first = busy > 60_000 ? busy - 20 : busy;
    const range = { first, last: first + 20 };
    const records: number[] = [first + 3];
    const chooser = new PortChooser('127.0.0.1', range, () => records);
    const chosen = await Promise.all(
      Array.from({ length: 8 }, () =>
        chooser.withFreePort(async (port) => {
          // A provision records its port a moment later (the record is written after other awaits).
          await new Promise((resolve) => setTimeout(resolve, 20));
          records.push(port);
          return port;
        }),
      ),
    );
    expect(new Set(chosen).size).toBe(8);
    expect(chosen).not.toContain(busy);
    expect(chosen).not.toContain(first + 3);
    for (const port of chosen) {
      expect(port).toBeGreaterThanOrEqual(range.first);
      expect(port).toBeLessThanOrEqual(range.last);
    }
  });

  it('says the range is exhausted, and frees a port whose use failed', async () => {
    const busy = await listening();
    const chooser = new PortChooser('127.0.0.1', { first: busy, last: busy }, () => []);
    await expect(chooser.withFreePort((port) => port)).rejects.toThrow(/no free SSH port left/);

    const free = await listening();
    listeners.pop()?.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const single = new PortChooser('127.0.0.1', { first: free, last: free }, () => []);
    await expect(
      single.withFreePort(() => {
        throw new Error('record not written');
      }),
    ).rejects.toThrow('record not written');
    expect(await single.withFreePort((port) => port)).toBe(free);
  });
});
