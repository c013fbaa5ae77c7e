/**
 * The network counters of the QEMU driver: QEMU's filter-mirror writes each frame as a 4-byte big-endian
 * length and the frame; the stream arrives in chunks cut anywhere (inside a length too).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { FrameLengths, NetTraffic } from './metrics.js';

const framed = (...sizes: number[]) =>
  Buffer.concat(
    sizes.flatMap((size) => {
      const length = Buffer.alloc(4);
      length.writeUInt32BE(size);
      return [length, Buffer.alloc(size, 0xab)];
    }),
  );

describe('FrameLengths', () => {
  it('reports each frame once, whatever the chunks', () => {
    const stream = framed(60, 1514, 0, 342, 70000);
    for (const cut of [1, 2, 3, 5, 7, 100, 1517, stream.length]) {
      const lengths: number[] = [];
      const frames = new FrameLengths((n) => lengths.push(n));
      for (let at = 0; at < stream.length; at += cut) frames.push(stream.subarray(at, at + cut));
      expect(lengths, `chunks of ${cut}`).toEqual([60, 1514, 0, 342, 70000]);
    }
  });
});

describe('NetTraffic', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-traffic-'));
  const traffic = new NetTraffic();
  afterAll(async () => {
    await traffic.closeAll();
    rmSync(dir, { recursive: true, force: true });
  });

  it('adds up the frames written to each direction’s socket, until the VM’s sockets close', async () => {
    const files = { rx: path.join(dir, 'vm.rx'), tx: path.join(dir, 'vm.tx') };
    await traffic.open('vm', files);
    const send = (file: string, data: Buffer) =>
      new Promise<void>((resolve, reject) => {
        const socket = net.createConnection(file, () => socket.end(data, () => resolve()));
        socket.on('error', reject);
      });
    await send(files.rx, framed(100, 200));
    await send(files.tx, framed(1500));
    for (const until = Date.now() + 5000; Date.now() < until; ) {
      const totals = traffic.totals('vm');
      if (totals.rxBytes === 300 && totals.txBytes === 1500) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(traffic.totals('vm')).toEqual({ rxBytes: 300, txBytes: 1500 });
    await traffic.close('vm', files);
    expect(traffic.totals('vm')).toEqual({ rxBytes: 0, txBytes: 0 });
    await expect(send(files.rx, framed(1))).rejects.toThrow();
  });
});
