/**
 * The QEMU driver end to end (issue 22): real VMs booted from the image `nimbus admin images build` makes,
 * through the real HTTPS server, reached with OpenSSH as `lambda`. One VM goes through the whole life of an
 * instance, in order, as a user would take it: SSH, hostname, the metadata service inside the guest, a
 * data volume seen as its device, an orderly stop read from the serial log, a start that finds the file
 * written before, a root snapshot restored, a resize seen as the new CPU count, a forced stop of a guest
 * that no longer answers, and a delete that leaves no process and no file. A second VM is killed from
 * outside, and the instance must show it within 10 s.
 *
 * Under TCG (no KVM here) each boot takes several seconds; the machine has 2 cores shared with others, so
 * the suite runs one VM at a time.
 */
import { execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_MARKS } from '../src/drivers/qemu/guest-files.js';
import { withQmp } from '../src/drivers/qemu/qmp.js';
import { account, waitFor } from './helpers/common.js';
import { act, eventsOf, getInstance, waitForStatus } from './helpers/instances.js';
import { ensureImage, IMAGE_DIR, qemuAvailable, ssh, sshArguments, sshKeyPair } from './helpers/qemu.js';
import { freePort, serverForSuite } from './helpers/server.js';
import { availableSnapshot, restore } from './helpers/snapshots.js';

type Json = Record<string, any>;

const canRun = await qemuAvailable();
const BOOT_MS = 180_000;

/** A block of 20 SSH ports no other suite uses: around a free port the system picked. */
const firstPort = canRun ? Math.min(await freePort(), 65_000) : 0;

describe.skipIf(!canRun)('QEMU driver: real VMs', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_DRIVER: 'qemu',
      NIMBUS_IMAGE_DIR: IMAGE_DIR,
      NIMBUS_QEMU_SSH_PORTS: `${firstPort}-${firstPort + 20}`,
      NIMBUS_METRICS_INTERVAL_SECONDS: '1',
    },
  });
  let key = '';
  let keys: { privateKey: string; publicKey: string };
  let instance: Json = {};
  let volume: Json = {};

  const dataDir = () => server.config.dataDir;
  const machineDir = (id: string) => path.join(dataDir(), 'qemu', 'machines', id);
  const serialLog = (id: string) => readFileSync(path.join(machineDir(id), 'serial.log'), 'utf8');
  const machine = (id: string) => JSON.parse(readFileSync(path.join(machineDir(id), 'machine.json'), 'utf8'));
  const inGuest = async (command: string) => {
    const result = await ssh(instance.ssh, keys.privateKey, command);
    if (result.code !== 0) {
      // What the guest's console said last tells most about a failed login.
      const tail = serialLog(instance.id).split('\n').slice(-25).join('\n');
      expect.fail(
        `ssh ${command}: exit ${result.code}: ${result.stderr}\n--- serial log (last lines) ---\n${tail}`,
      );
    }
    return result.stdout.trim();
  };

  beforeAll(async () => {
    await ensureImage();
    keys = await sshKeyPair();
    ({ key } = await account(server));
    const sshKey = await server.request('POST', '/v1/ssh-keys', {
      key,
      body: { name: 'suite', public_key: keys.publicKey },
    });
    expect(sshKey.status, sshKey.text).toBe(201);
  }, 900_000);

  it('refuses an image that is not in the image dir, naming those that are', async () => {
    const reply = await server.request('POST', '/v1/instances', {
      key,
      body: { name: 'nope', instance_type: 'compute-1x', region: 'us-east-1', image: 'rocky-9' },
    });
    expect(reply.status, reply.text).toBe(400);
    expect(reply.body.error.details).toMatchObject({ field: 'image', value: 'rocky-9' });
    expect(reply.body.error.details.allowed_values).toContain('debian-12');
  });

  it(
    'creates a VM that is running once its SSH answers, and logs in as lambda with the key',
    async () => {
      const created = await server.request('POST', '/v1/instances', {
        key,
        body: {
          name: 'vm-1',
          instance_type: 'compute-1x',
          region: 'us-east-1',
          image: 'debian-12',
          ssh_keys: ['suite'],
          user_data: '#!/bin/sh\necho from-user-data > /var/lib/nimbus/ran\n',
        },
      });
      expect(created.status, created.text).toBe(202);
      instance = await waitForStatus(server, key, created.body.data.id, 'running', BOOT_MS);
      expect(instance.ssh).toMatchObject({ host: '127.0.0.1', user: 'lambda' });
      expect(instance.ssh.port).toBeGreaterThanOrEqual(firstPort);
      const network = await server.request('GET', `/v1/instances/${instance.id}/network`, { key });
      expect(network.body.data.ssh).toEqual(instance.ssh);

      expect(await inGuest('whoami')).toBe('lambda');
      expect(await inGuest('hostname')).toBe(instance.hostname);
      // No password login at all: without the key, OpenSSH gets nowhere.
      const withoutKey = await ssh(instance.ssh, '/dev/null', 'true');
      expect(withoutKey.code).not.toBe(0);
      // Guest files are the owner's alone.
      for (const file of ['root.qcow2', 'seed.iso', 'serial.log', 'machine.json']) {
        expect((statSync(path.join(machineDir(instance.id), file)).mode & 0o777).toString(8), file).toBe(
          '600',
        );
      }
    },
    BOOT_MS + 60_000,
  );

  it('answers the metadata service inside the guest at 169.254.169.254, for that instance only', async () => {
    const metadata = 'http://169.254.169.254/latest';
    expect(await inGuest(`wget -qO- ${metadata}/meta-data/instance-id`)).toBe(instance.id);
    expect(await inGuest(`wget -qO- ${metadata}/meta-data/hostname`)).toBe(instance.hostname);
    // A guest naming another instance is still answered about itself.
    expect(
      await inGuest(`wget -qO- --header 'X-Nimbus-Instance-Id: ins_other' ${metadata}/meta-data/instance-id`),
    ).toBe(instance.id);
    expect(await inGuest(`wget -qO- ${metadata}/user-data`)).toContain('from-user-data');
  }, 120_000);

  it("lets SSH in only where the instance's firewall allows it, from the client's address", async () => {
    const patch = (preset: string) =>
      server.request('PATCH', `/v1/instances/${instance.id}`, { key, body: { firewall_preset: preset } });
    expect((await patch('none')).status).toBe(200);
    const check = await server.request(
      'GET',
      `/v1/instances/${instance.id}/network/check?protocol=tcp&port=22&address=127.0.0.1`,
      { key },
    );
    expect(check.body.data.verdict).toBe('deny');
    const refused = await ssh(instance.ssh, keys.privateKey, 'true', 30_000);
    expect(refused.code).not.toBe(0);
    expect((await patch('ssh-only')).status).toBe(200);
    expect(await inGuest('echo through')).toBe('through');
  }, 120_000);

  it('writes a file, and sees an attached volume as its device', async () => {
    await inGuest('echo kept-across-boots > ~/note.txt && sync');
    const created = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'data-1', size_gb: 2, region: 'us-east-1', filesystem: 'ext4' },
    });
    expect(created.status, created.text).toBe(202);
    volume = created.body.data;
    await waitFor(
      'volume available',
      async () => {
        const reply = await server.request('GET', `/v1/volumes/${volume.id}`, { key });
        return reply.body.data.status === 'available' ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const attach = await server.request('POST', `/v1/volumes/${volume.id}/attach`, {
      key,
      body: { instance_id: instance.id },
    });
    expect(attach.status, attach.text).toBe(202);
    const attached = await waitFor(
      'volume in use',
      async () => {
        const reply = await server.request('GET', `/v1/volumes/${volume.id}`, { key });
        return reply.body.data.status === 'in-use' ? reply.body.data : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(attached.device_name).toBe('/dev/vdb');
    const serial = await waitFor(
      'the guest to see /dev/vdb',
      async () => {
        const result = await ssh(instance.ssh, keys.privateKey, 'cat /sys/block/vdb/serial');
        return result.code === 0 ? result.stdout.trim() : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(volume.id.endsWith(serial)).toBe(true);
    expect(await inGuest('cat /sys/block/vdb/size')).toBe(String((2 * 1024 ** 3) / 512));
  }, 180_000);

  it('grows the attached volume online, and copies it while in use into a snapshot that restores as a new volume', async () => {
    // lambda is in group disk: a marker written straight onto the device, past the filesystem's first blocks.
    await inGuest('echo volume-marker | dd of=/dev/vdb bs=512 seek=2000000 conv=fsync 2>/dev/null');
    const grow = await server.request('POST', `/v1/volumes/${volume.id}/resize`, {
      key,
      body: { size_gb: 3 },
    });
    expect(grow.status, grow.text).toBe(202);
    await waitFor(
      'the guest to see 3 GB',
      async () =>
        (await inGuest('cat /sys/block/vdb/size')) === String((3 * 1024 ** 3) / 512) ? true : undefined,
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    const snapshot = await availableSnapshot(server, key, { volume_id: volume.id });
    const restored = await restore(server, key, snapshot.id, { name: 'from-snapshot' });
    expect(restored.status, restored.text).toBe(202);
    const copy = restored.body.data.volume;
    await waitFor(
      'the restored volume available',
      async () => {
        const reply = await server.request('GET', `/v1/volumes/${copy.id}`, { key });
        return reply.body.data.status === 'available' ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
    // The copy holds what the volume held when the snapshot was taken.
    const file = path.join(dataDir(), 'qemu', 'volumes', `${copy.id}.qcow2`);
    const raw = `${file}.raw`;
    execFileSync('qemu-img', ['convert', '-f', 'qcow2', '-O', 'raw', file, raw]);
    const fd = openSync(raw, 'r');
    const marker = Buffer.alloc(13);
    readSync(fd, marker, 0, 13, 2_000_000 * 512);
    closeSync(fd);
    rmSync(raw);
    expect(marker.toString()).toBe('volume-marker');
    expect((await server.request('DELETE', `/v1/volumes/${copy.id}`, { key })).status).toBe(202);
  }, 300_000);

  it(
    'stops in an orderly way (the serial log says so) and starts with the file still there',
    async () => {
      const stop = await act(server, key, instance.id, 'stop');
      expect(stop.status, stop.text).toBe(202);
      await waitForStatus(server, key, instance.id, 'stopped', 90_000);
      const log = serialLog(instance.id);
      expect(log).toContain(CONSOLE_MARKS.powerButton);
      expect(log).toContain(CONSOLE_MARKS.unmounted);
      expect(log).toContain('reboot: Power down');
      expect(machine(instance.id).pid).toBeNull();

      expect((await act(server, key, instance.id, 'start')).status).toBe(202);
      instance = await waitForStatus(server, key, instance.id, 'running', BOOT_MS);
      expect(await inGuest('cat ~/note.txt')).toBe('kept-across-boots');
      // The volume came back with the boot, at the same device.
      expect(volume.id.endsWith(await inGuest('cat /sys/block/vdb/serial'))).toBe(true);
    },
    BOOT_MS + 120_000,
  );

  it(
    'snapshots the root disk of the running VM and restores it over the stopped instance',
    async () => {
      const snapshot = await availableSnapshot(server, key, { instance_id: instance.id });
      await inGuest('rm ~/note.txt && echo after-snapshot > ~/later.txt && sync');
      // The volume goes first: a restore needs the instance stopped, and its volume detached is simplest.
      expect((await server.request('POST', `/v1/volumes/${volume.id}/detach`, { key })).status).toBe(202);
      await waitFor(
        'volume detached',
        async () => {
          const reply = await server.request('GET', `/v1/volumes/${volume.id}`, { key });
          return reply.body.data.status === 'available' ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
      await waitForStatus(server, key, instance.id, 'stopped', 90_000);
      const restored = await restore(server, key, snapshot.id, { instance_id: instance.id });
      expect(restored.status, restored.text).toBe(202);
      await waitFor(
        'root volume restored',
        async () => {
          const reply = await server.request('GET', `/v1/volumes/${instance.root_volume_id}`, { key });
          return reply.body.data.status === 'in-use' ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      expect((await act(server, key, instance.id, 'start')).status).toBe(202);
      instance = await waitForStatus(server, key, instance.id, 'running', BOOT_MS);
      expect(await inGuest('cat ~/note.txt')).toBe('kept-across-boots');
      expect(await inGuest('test -e ~/later.txt && echo yes || echo no')).toBe('no');
    },
    BOOT_MS * 2 + 120_000,
  );

  it(
    'resizes: the guest sees the new CPU count',
    async () => {
      expect(await inGuest('nproc')).toBe('1');
      const resized = await act(server, key, instance.id, 'resize', { instance_type: 'compute-2x' });
      expect(resized.status, resized.text).toBe(202);
      await waitFor(
        'resized and running',
        async () => {
          const now = await getInstance(server, key, instance.id);
          return now.status === 'running' && now.instance_type === 'compute-2x' ? now : undefined;
        },
        { timeoutMs: BOOT_MS + 90_000, intervalMs: 500 },
      );
      expect(await inGuest('nproc')).toBe('2');
      // The root disk grew to the new type's storage (50 GB).
      expect(await inGuest('cat /sys/block/vda/size')).toBe(String((50 * 1024 ** 3) / 512));
    },
    BOOT_MS + 150_000,
  );

  it('reports metrics from the VM (CPU time, disk I/O, guest memory, network)', async () => {
    // Writes spread over 30 s, so the samples (a rate between two of them) cannot miss them.
    await inGuest(
      "setsid sh -c 'for i in $(seq 1 30); do dd if=/dev/zero of=/tmp/blob bs=1M count=4 conv=fsync 2>/dev/null; sleep 1; done; rm -f /tmp/blob' > /dev/null 2>&1 < /dev/null &",
    );
    // SSH traffic both ways: 256 KiB sent to the guest (its rx) and 512 KiB back from it (its tx).
    const transferAt = Date.now();
    const toGuest = 'x'.repeat(256 * 1024);
    const fromGuest = await new Promise<{ code: number | null; stdout: Buffer }>((resolve, reject) => {
      const child = spawn(
        'ssh',
        [...sshArguments(instance.ssh, keys.privateKey), 'wc -c; head -c 524288 /dev/zero'],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const chunks: Buffer[] = [];
      child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout: Buffer.concat(chunks) }));
      child.stdin.end(toGuest);
    });
    expect(fromGuest.code).toBe(0);
    const counted = `${toGuest.length}\n`;
    expect(fromGuest.stdout.subarray(0, counted.length).toString()).toBe(counted);
    expect(fromGuest.stdout.length).toBe(counted.length + 524288);
    const seriesOf = (body: Json, metric: string): [string, number][] =>
      body.data.series.find((s: Json) => s.metric === metric)?.points ?? [];
    // Bytes over the window from the rates, at least: each point is its bucket's average rate over the
    // samples it has so far (one a second), so × `step` is no less than the bucket's bytes.
    const bytes = (body: Json, metric: string) =>
      seriesOf(body, metric).reduce((sum, [, v]) => sum + v, 0) * body.data.step;
    // The frames counted on the host hold at least the SSH payload (half of it, to be safe).
    const enoughTraffic = (body: Json) =>
      bytes(body, 'net_rx_bps') > 128 * 1024 && bytes(body, 'net_tx_bps') > 256 * 1024;
    const body = await waitFor(
      'a metrics sample with disk writes, and the SSH traffic counted',
      async () => {
        const start = new Date(Date.now() - 120_000).toISOString();
        const reply = await server.request('GET', `/v1/instances/${instance.id}/metrics?start=${start}`, {
          key,
        });
        if (reply.status !== 200) return undefined;
        const wrote = seriesOf(reply.body, 'disk_write_bps').some(([, v]) => v > 0);
        return wrote && enoughTraffic(reply.body) ? reply.body : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    );
    // compute-2x now: 4 GB scaled by 0.125 is 512 MiB (the window may still hold compute-1x's 256 MiB).
    expect(seriesOf(body, 'memory_total_bytes').at(-1)?.[1]).toBe(512 * 1024 ** 2);
    const used = seriesOf(body, 'memory_used_bytes').map(([, v]) => v);
    expect(used.some((v) => v > 0 && v < 512 * 1024 ** 2)).toBe(true);
    expect(seriesOf(body, 'cpu_percent').some(([, v]) => v > 0)).toBe(true);
    expect(enoughTraffic(body)).toBe(true);
    // Counted, not made up: before the transfer the buckets hold at most an earlier case's SSH command
    // (a few kB), far below the transfer's hundreds of kB/s.
    const idle = (metric: string) =>
      seriesOf(body, metric)
        .filter(([t]) => Date.parse(t) + body.data.step * 1000 < transferAt)
        .map(([, v]) => v);
    for (const metric of ['net_rx_bps', 'net_tx_bps']) {
      expect(
        Math.max(0, ...idle(metric)),
        `${metric}: ${JSON.stringify(seriesOf(body, metric))}`,
      ).toBeLessThan(50_000);
    }
  }, 150_000);

  it('force-stops a guest that no longer answers (paused), at once', async () => {
    const pid = machine(instance.id).pid as number;
    await withQmp(path.join(dataDir(), 'qemu', 'run', `${instance.id}.qmp`), (qmp) => qmp.execute('stop'));
    expect((await act(server, key, instance.id, 'stop')).status).toBe(202);
    // The power button goes unanswered: still stopping a few seconds on.
    await new Promise((r) => setTimeout(r, 3000));
    expect((await getInstance(server, key, instance.id)).status).toBe('stopping');
    const forced = await act(server, key, instance.id, 'stop', { force: true });
    expect(forced.status, forced.text).toBe(202);
    expect(forced.body.data.status).toBe('stopped');
    await waitFor('QEMU gone', () => (processAlive(pid) ? undefined : true), {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
  }, 60_000);

  it('deletes: no process and no file is left', async () => {
    expect((await server.request('DELETE', `/v1/instances/${instance.id}`, { key })).status).toBe(202);
    await waitForStatus(server, key, instance.id, 'gone', 60_000);
    const volumeDelete = await server.request('DELETE', `/v1/volumes/${volume.id}`, { key });
    expect(volumeDelete.status, volumeDelete.text).toBe(202);
    await waitFor(
      'volume gone',
      async () => {
        const reply = await server.request('GET', `/v1/volumes/${volume.id}`, { key });
        return reply.status === 404 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const leftovers = (dir: string) =>
      readdirSync(path.join(dataDir(), 'qemu', dir)).filter(
        (f) => f.includes(instance.id.slice(4)) || f.includes(volume.id.slice(4)),
      );
    expect(leftovers('machines')).toEqual([]);
    expect(leftovers('run')).toEqual([]);
    expect(leftovers('volumes')).toEqual([]);
    expect(qemuProcesses(instance.id)).toEqual([]);
  }, 120_000);

  it(
    'notices a QEMU killed from outside within 10 s: error, with an instance.error event',
    async () => {
      const created = await server.request('POST', '/v1/instances', {
        key,
        body: {
          name: 'vm-2',
          instance_type: 'compute-1x',
          region: 'us-east-1',
          image: 'debian-12',
          ssh_keys: ['suite'],
        },
      });
      expect(created.status, created.text).toBe(202);
      const id = created.body.data.id;
      await waitForStatus(server, key, id, 'running', BOOT_MS);
      const pid = machine(id).pid as number;
      process.kill(pid, 'SIGKILL');
      const killedAt = Date.now();
      await waitForStatus(server, key, id, 'error', 10_000);
      expect(Date.now() - killedAt).toBeLessThan(10_000);
      const error = (await eventsOf(server, key, id)).find((e) => e.type === 'instance.error');
      expect(error?.data).toMatchObject({ reason: 'machine_exited', status: 'error' });
      expect(error?.data.message).toContain(`pid ${pid}`);
      // It starts again from error.
      expect((await act(server, key, id, 'start')).status).toBe(202);
      await waitForStatus(server, key, id, 'running', BOOT_MS);
      expect((await server.request('DELETE', `/v1/instances/${id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, id, 'gone', 60_000);
    },
    BOOT_MS * 2 + 60_000,
  );

  afterAll(() => {
    // The server's log, for whoever reads a failure (test-results/ is not committed).
    mkdirSync('test-results', { recursive: true });
    writeFileSync('test-results/qemu-server.log', server.logs());
    // Nothing of ours may outlive the suite.
    for (const pid of qemuProcesses('')) {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(server.config.dataDir))
        process.kill(pid, 'SIGKILL');
    }
  });
});

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z');
  } catch {
    return false;
  }
}

/** Pids of QEMU processes whose command line mentions `marker`. */
function qemuProcesses(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        return cmdline.startsWith('qemu-system') && cmdline.includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}
