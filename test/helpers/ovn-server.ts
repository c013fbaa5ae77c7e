/**
 * The end of a suite that ran `nimbus serve` with NIMBUS_NETWORK=ovn in a data dir of its own: whatever
 * the server and its VMs may have left on the host is removed, also when a case failed half-way — the
 * server stopped (killed if it does not stop), QEMU killed, the VMs' taps and the VPCs' namespaces
 * deleted, the embedded OVN's daemons killed, its bridges deleted, the data dir removed.
 */
import { existsSync, rmSync } from 'node:fs';
import type { OvnNetwork } from '../../src/drivers/ovn/network.js';
import { providerBridgeName } from '../../src/drivers/ovn/uplink.js';
import { assertBuilt, type ChildServer } from './child-server.js';
import { qemuProcessesOf } from './driver.js';
import { processesNaming, succeeds } from './ovn.js';
import { ensureImage, IMAGE_DIR } from './qemu.js';
import { freePort } from './server.js';

export async function removeOvnServer(options: {
  server: ChildServer | undefined;
  dataDir: string;
  /** The server's network, attached (OvnNetwork.attach) to read its names. */
  network: OvnNetwork;
  /** The instances the suite made: their taps. */
  instanceIds: readonly string[];
}): Promise<void> {
  const { server, dataDir, network } = options;
  network.nb.close();
  await server?.stop().catch(() => server?.kill());
  for (const pid of qemuProcessesOf(dataDir)) process.kill(pid, 'SIGKILL');
  for (const id of options.instanceIds) {
    const tap = network.tapName(id);
    if (existsSync(`/sys/class/net/${tap}`)) succeeds('ip', ['link', 'del', tap]);
  }
  for (const namespace of network.hostNamespaces()) succeeds('ip', ['netns', 'del', namespace]);
  for (const pid of processesNaming(dataDir)) process.kill(pid, 'SIGKILL');
  const bridge = network.endpoints.integrationBridge;
  for (const name of [bridge, providerBridgeName(bridge)]) {
    if (existsSync(`/sys/class/net/${name}`)) succeeds('ip', ['link', 'del', name]);
  }
  rmSync(dataDir, { recursive: true, force: true });
}

/**
 * The settings of a server whose instances are real VMs on OVN, once the build and the guest image are
 * there: the qemu driver, the OVN network, the image dir and a free range of SSH forward ports; `extra`
 * adds to them (the public uplink, a metrics interval).
 */
export async function ovnQemuEnv(extra: Record<string, string> = {}): Promise<Record<string, string>> {
  assertBuilt();
  await ensureImage();
  const first = await freePort();
  return {
    NIMBUS_DRIVER: 'qemu',
    NIMBUS_NETWORK: 'ovn',
    NIMBUS_IMAGE_DIR: IMAGE_DIR,
    NIMBUS_QEMU_SSH_PORTS: `${first}-${first + 10}`,
    ...extra,
  };
}
