/**
 * Snapshots under the QEMU driver, read back from inside real guests (issue 22): an instance booted from
 * a snapshot of another's root disk has that disk's files, and a data volume's snapshot restored over
 * the same volume (in place) gives the guest the old content once the volume is attached again.
 *
 * Under TCG (no KVM here) each boot takes several seconds on 2 shared cores: two VMs in all.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { account, waitFor } from './helpers/common.js';
import { qemuProcessesOf } from './helpers/driver.js';
import { waitForStatus } from './helpers/instances.js';
import { ensureImage, IMAGE_DIR, qemuAvailable, ssh, sshKeyPair } from './helpers/qemu.js';
import { freePort, serverForSuite } from './helpers/server.js';
import { availableSnapshot, restore } from './helpers/snapshots.js';

type Json = Record<string, any>;

const canRun = await qemuAvailable();
const BOOT_MS = 180_000;
/** Where on the data volume the test writes: past the filesystem's first blocks, read back with dd. */
const MARK_SECTOR = 2_000_000;

const firstPort = canRun ? Math.min(await freePort(), 65_000) : 0;

describe.skipIf(!canRun)('QEMU driver: snapshots seen from inside the guest', () => {
  const server = serverForSuite({
    env: {
      NIMBUS_DRIVER: 'qemu',
      NIMBUS_IMAGE_DIR: IMAGE_DIR,
      NIMBUS_QEMU_SSH_PORTS: `${firstPort}-${firstPort + 20}`,
    },
  });
  let key = '';
  let keys: { privateKey: string; publicKey: string };
  let source: Json = {};

  const serialLog = (id: string) =>
    readFileSync(path.join(server.config.dataDir, 'qemu', 'machines', id, 'serial.log'), 'utf8');
  /** Runs `command` in the instance's guest as lambda; a failure shows the end of its console. */
  const inGuest = async (instance: Json, command: string) => {
    const result = await ssh(instance.ssh, keys.privateKey, command);
    if (result.code !== 0) {
      const tail = serialLog(instance.id).split('\n').slice(-25).join('\n');
      expect.fail(`ssh ${command}: exit ${result.code}: ${result.stderr}\n--- serial log ---\n${tail}`);
    }
    return result.stdout.trim();
  };
  const volumeStatus = (id: string, status: string, timeoutMs = 120_000) =>
    waitFor(
      `volume ${id} ${status}`,
      async () => {
        const reply = await server.request('GET', `/v1/volumes/${id}`, { key });
        return reply.body.data?.status === status ? reply.body.data : undefined;
      },
      { timeoutMs, intervalMs: 250 },
    );

  beforeAll(async () => {
    await ensureImage();
    keys = await sshKeyPair();
    ({ key } = await account(server));
    const sshKey = await server.request('POST', '/v1/ssh-keys', {
      key,
      body: { name: 'suite', public_key: keys.publicKey },
    });
    expect(sshKey.status, sshKey.text).toBe(201);
    const created = await server.request('POST', '/v1/instances', {
      key,
      body: {
        name: 'source',
        instance_type: 'compute-1x',
        region: 'us-east-1',
        image: 'debian-12',
        ssh_keys: ['suite'],
      },
    });
    expect(created.status, created.text).toBe(202);
    source = await waitForStatus(server, key, created.body.data.id, 'running', BOOT_MS);
  }, 900_000);

  it(
    'boots an instance created from a root snapshot, with the files the disk held when it was taken',
    async () => {
      await inGuest(source, 'echo written-before-the-snapshot > ~/kept.txt && sync');
      // Taken of the running VM: QEMU copies the disk as it was when the copy began.
      const snapshot = await availableSnapshot(server, key, { instance_id: source.id });
      await inGuest(source, 'echo written-after > ~/kept.txt && echo later > ~/later.txt && sync');

      const restored = await restore(server, key, snapshot.id, {
        instance: { name: 'from-snapshot', instance_type: 'compute-1x', ssh_keys: ['suite'] },
      });
      expect(restored.status, restored.text).toBe(202);
      const id = restored.body.data.instance_id as string;
      expect(restored.body.data.volume.status).toBe('restoring');
      const booted = await waitForStatus(server, key, id, 'running', BOOT_MS);
      expect(booted.image).toBe('debian-12');
      expect(await inGuest(booted, 'cat ~/kept.txt')).toBe('written-before-the-snapshot');
      expect(await inGuest(booted, 'test -e ~/later.txt && echo yes || echo no')).toBe('no');
      // The disk is the source's, the identity its own: the seed names the new instance.
      expect(await inGuest(booted, 'hostname')).toBe(booted.hostname);
      expect(await inGuest(booted, 'wget -qO- http://169.254.169.254/latest/meta-data/instance-id')).toBe(id);
      // The source goes on with its own disk.
      expect(await inGuest(source, 'cat ~/kept.txt')).toBe('written-after');

      expect((await server.request('DELETE', `/v1/instances/${id}`, { key })).status).toBe(202);
      await waitForStatus(server, key, id, 'gone', 60_000);
    },
    BOOT_MS + 180_000,
  );

  it("restores a data volume's snapshot over the volume itself: attached again, the guest reads the old content", async () => {
    const created = await server.request('POST', '/v1/volumes', {
      key,
      body: { name: 'data', size_gb: 2, region: 'us-east-1', filesystem: 'ext4' },
    });
    expect(created.status, created.text).toBe(202);
    const volume = created.body.data as Json;
    await volumeStatus(volume.id, 'available');
    const attach = async () => {
      const reply = await server.request('POST', `/v1/volumes/${volume.id}/attach`, {
        key,
        body: { instance_id: source.id },
      });
      expect(reply.status, reply.text).toBe(202);
      await volumeStatus(volume.id, 'in-use');
      await waitFor(
        'the guest to see /dev/vdb',
        async () => {
          const result = await ssh(source.ssh, keys.privateKey, 'cat /sys/block/vdb/serial');
          return result.code === 0 && volume.id.endsWith(result.stdout.trim()) ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
    };
    const detach = async () => {
      const reply = await server.request('POST', `/v1/volumes/${volume.id}/detach`, { key });
      expect(reply.status, reply.text).toBe(202);
      await volumeStatus(volume.id, 'available');
    };
    // lambda is in group disk: it writes and reads the device itself (a device plugged in anew has no cache).
    const write = (text: string) =>
      inGuest(
        source,
        `printf '%-16s' ${text} | dd of=/dev/vdb bs=512 seek=${MARK_SECTOR} conv=fsync,notrunc 2>/dev/null`,
      );
    const read = () =>
      inGuest(source, `dd if=/dev/vdb bs=512 skip=${MARK_SECTOR} count=1 2>/dev/null | head -c 16`);

    await attach();
    await write('before-snapshot');
    expect(await read()).toBe('before-snapshot');
    const snapshot = await availableSnapshot(server, key, { volume_id: volume.id });
    await write('after-snapshot');
    expect(await read()).toBe('after-snapshot');

    // In place: the volume must be detached, and is `restoring`, then `available` again.
    await detach();
    const restored = await restore(server, key, snapshot.id, { target_volume_id: volume.id });
    expect(restored.status, restored.text).toBe(202);
    expect(restored.body.data.volume).toMatchObject({ id: volume.id, status: 'restoring' });
    await volumeStatus(volume.id, 'available');
    await attach();
    expect(await read()).toBe('before-snapshot');
    // The filesystem made at create came back whole too.
    expect(await inGuest(source, 'dd if=/dev/vdb bs=1 skip=1080 count=2 2>/dev/null | od -An -tx1')).toBe(
      '53 ef',
    );
  }, 300_000);

  afterAll(() => {
    // Nothing of ours may outlive the suite.
    for (const pid of qemuProcessesOf(server.config.dataDir)) process.kill(pid, 'SIGKILL');
  });
});
