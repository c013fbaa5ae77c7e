/**
 * The QEMU driver across a Nimbus killed with -9 (issue 22): the server runs as a child process
 * (`bin/nimbus serve`, so `npm run build` first), is killed while a VM boots, and started again on the
 * same data dir. The VM must not be booted twice: the restarted server finds the same QEMU process (pid
 * and command line), opens its metadata socket again, and reports the instance running once its SSH
 * answers — and the guest's metadata service works through the re-opened socket.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertBuilt, type ChildServer, spawnServer } from './helpers/child-server.js';
import { waitFor } from './helpers/common.js';
import { qemuProcessesMentioning, qemuProcessesOf } from './helpers/driver.js';
import { ensureImage, IMAGE_DIR, qemuAvailable, ssh, sshKeyPair } from './helpers/qemu.js';
import { freePort } from './helpers/server.js';

type Json = Record<string, any>;

const canRun = await qemuAvailable();
const BOOT_MS = 180_000;

describe.skipIf(!canRun)('QEMU driver: Nimbus killed with -9 mid-boot', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-qemu-restart-'));
  let server: ChildServer | undefined;
  let env: Record<string, string> = {};

  beforeAll(async () => {
    assertBuilt();
    await ensureImage();
    const first = await freePort();
    env = {
      NIMBUS_DRIVER: 'qemu',
      NIMBUS_IMAGE_DIR: IMAGE_DIR,
      NIMBUS_QEMU_SSH_PORTS: `${first}-${first + 10}`,
    };
  }, 900_000);

  afterAll(async () => {
    await server?.kill();
    for (const pid of qemuProcessesOf(dataDir)) process.kill(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it(
    're-adopts the booting VM instead of booting it twice',
    async () => {
      const keys = await sshKeyPair();
      server = await spawnServer({ dataDir, env, startTimeoutMs: 60_000 });
      const key = server.rootKey;
      expect(
        (
          await server.request('POST', '/v1/ssh-keys', {
            key,
            body: { name: 'k', public_key: keys.publicKey },
          })
        ).status,
      ).toBe(201);
      const created = await server.request('POST', '/v1/instances', {
        key,
        body: {
          name: 'adopted',
          instance_type: 'compute-1x',
          region: 'us-east-1',
          image: 'debian-12',
          ssh_keys: ['k'],
        },
      });
      expect(created.status, created.text).toBe(202);
      const id = created.body.data.id as string;
      const machineFile = path.join(dataDir, 'qemu', 'machines', id, 'machine.json');

      // QEMU is up (its pid recorded) and the guest still booting: now the server dies.
      const pid = await waitFor(
        'QEMU started',
        () => {
          try {
            return (JSON.parse(readFileSync(machineFile, 'utf8')) as Json).pid ?? undefined;
          } catch {
            return undefined;
          }
        },
        { timeoutMs: 60_000, intervalMs: 20 },
      );
      const before = await server.request('GET', `/v1/instances/${id}`, { key });
      expect(before.body.data.status).toBe('starting');
      await server.kill();
      expect(qemuProcessesMentioning(id)).toEqual([pid]);

      server = await spawnServer({ dataDir, env, startTimeoutMs: 60_000 });
      const running = await waitFor(
        'the instance running after the restart',
        async () => {
          const reply = await server!.request('GET', `/v1/instances/${id}`, { key });
          return reply.body.data.status === 'running' ? (reply.body.data as Json) : undefined;
        },
        { timeoutMs: BOOT_MS, intervalMs: 500 },
      );
      // The same process, and only it: not booted twice.
      expect(qemuProcessesMentioning(id)).toEqual([pid]);
      expect(JSON.parse(readFileSync(machineFile, 'utf8')).pid).toBe(pid);
      expect(server.output()).toMatch(new RegExp(`"adopted":\\[[^\\]]*"${id}"`));
      // The metadata socket was opened again by the new server.
      const meta = await ssh(
        running.ssh,
        keys.privateKey,
        'wget -qO- http://169.254.169.254/latest/meta-data/instance-id',
      );
      expect(meta.stdout.trim(), meta.stderr).toBe(id);

      expect((await server.request('DELETE', `/v1/instances/${id}`, { key })).status).toBe(202);
      await waitFor(
        'the instance gone',
        async () =>
          (await server!.request('GET', `/v1/instances/${id}`, { key })).status === 404 ? true : undefined,
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      expect(qemuProcessesMentioning(id)).toEqual([]);
    },
    BOOT_MS + 240_000,
  );
});
