/**
 * The QEMU command line of a VM, as an argument array (never a string through a shell).
 *
 * - `-sandbox on` (seccomp) denying obsolete system calls and resource control; spawning stays allowed,
 *   because the metadata forward (`guestfwd … cmd:`) starts one `socat` per guest connection, and
 *   privilege changes too, which -daemonize needs (QEMU 7.2 exits at start with elevateprivileges=deny).
 *   Nimbus never runs QEMU with more privileges than its own.
 * - user-mode networking, restricted: the guest reaches nothing on the host or beyond except what is
 *   forwarded to it (its SSH port) and its metadata service at 169.254.169.254; nothing on the host's
 *   own network configuration changes. The guest network is 169.254.0.0/16 because QEMU refuses a
 *   guest forward outside the user network (checked with QEMU 7.2).
 * - or, with NIMBUS_NETWORK=ovn, a tap Nimbus made and plugged into OVN's integration bridge
 *   (drivers/ovn/network.ts), opened by name (`script=no`: QEMU configures nothing on the host). No
 *   vnet header: the guest then gets no checksum offload and sends every packet with its checksum, which
 *   the userspace datapath's connection tracking needs (it drops packets left to the hardware).
 * - fixed PCI slots: the root disk before the data disks, data disks in device-name order, so the guest
 *   names them /dev/vda, /dev/vdb… as the API does, boot after boot and after hot-plugs.
 * - `-no-shutdown`: a guest that powers itself off leaves QEMU running, paused in `shutdown`, so the
 *   driver can tell an orderly power-off from a QEMU that died.
 * - the network metrics: every frame of the netdev mirrored (`filter-mirror`) to Nimbus's unix socket of
 *   its direction (metrics.ts NetTraffic). On the netdev, queue=tx holds the frames the netdev sends to
 *   the guest (the guest's rx) and queue=rx those it receives from the guest (checked with QEMU 7.2: the
 *   first frame on queue=rx came from the guest's MAC). QEMU connects as a client, retried every second.
 */
import type { GuestImage } from './images.js';

export const GUEST_NETWORK = {
  net: '169.254.0.0/16',
  host: '169.254.0.2',
  dns: '169.254.0.3',
  dhcpStart: '169.254.0.15',
  metadata: '169.254.169.254',
} as const;

/** PCI slots (pc machine): 0 host bridge, 1 PIIX (IDE: the seed CD-ROM of cloud images). */
const SLOTS = { net: 3, balloon: 4, rng: 5, root: 6, firstData: 7 } as const;

/** The PCI slot of a data disk by its device name (/dev/vdb → 7 … /dev/vdz → 31). */
export function dataDiskSlot(deviceName: string): number {
  const letter = /^\/dev\/vd([b-z])$/.exec(deviceName)?.[1];
  if (!letter) throw new Error(`qemu driver: no PCI slot for device ${deviceName}`);
  return SLOTS.firstData + (letter.charCodeAt(0) - 'b'.charCodeAt(0));
}

export const hex = (slot: number) => `0x${slot.toString(16)}`;

/** A virtio-blk serial (20 characters at most): the id's last 20, so the guest can tell its disks. */
/** The CPU model of a KVM guest: the host's (process.ts kvmUsable probes with the same). */
export const KVM_CPU = ['-cpu', 'host'];

export const diskSerial = (id: string) => id.replace(/^[a-z]+_/, '').slice(-20);

export interface VmLayout {
  id: string;
  accel: 'kvm' | 'tcg';
  vcpus: number;
  memoryMb: number;
  image: GuestImage;
  rootDisk: string;
  seedIso: string;
  /** The seed as plain files (seed.ts), handed to a built image through fw_cfg as opt/nimbus/<name>. */
  seedFiles: { name: string; file: string }[];
  serialLog: string;
  pidFile: string;
  qmpSocket: string;
  metadataSocket: string;
  mac: string;
  /** The NIC's network: QEMU's user-mode one with the guest's SSH port forwarded, or a tap on OVN. */
  nic: { kind: 'user'; ssh: { host: string; port: number } } | { kind: 'tap'; ifname: string };
  dataDisks: { id: string; file: string; deviceName: string }[];
  /** Nimbus's sockets that count the frames the guest receives (rx) and sends (tx). */
  traffic: { rx: string; tx: string };
}

/**
 * The blockdev node name of a data disk (the QMP handle for hot-plug and resize) and its device id. QEMU
 * takes node names of at most 31 characters, so both are made of the serial (the id's last 20).
 */
export const dataNode = (volumeId: string) => `disk-${diskSerial(volumeId)}`;
export const dataDevice = (volumeId: string) => `dev-${diskSerial(volumeId)}`;

/** socat's address for the metadata socket; the path is ours (data dir and id), quoted for QEMU's sh -c. */
export function metadataCommand(socketPath: string): string {
  if (/['\s,]/.test(socketPath)) {
    throw new Error(`qemu driver: the metadata socket path ${socketPath} holds a quote, comma or space`);
  }
  return `socat - 'UNIX-CONNECT:${socketPath}'`;
}

/** QEMU's user-mode network, restricted: the guest reaches its forwarded SSH port and metadata only. */
function userNetdev(vm: VmLayout, ssh: { host: string; port: number }): string {
  const net = GUEST_NETWORK;
  return [
    'user',
    'id=net0',
    'restrict=on',
    `net=${net.net}`,
    `host=${net.host}`,
    `dns=${net.dns}`,
    `dhcpstart=${net.dhcpStart}`,
    `hostfwd=tcp:${ssh.host}:${ssh.port}-:22`,
    `guestfwd=tcp:${net.metadata}:80-cmd:${metadataCommand(vm.metadataSocket)}`,
  ].join(',');
}

export function qemuArgs(vm: VmLayout): string[] {
  const files = [
    vm.rootDisk,
    vm.seedIso,
    vm.serialLog,
    vm.traffic.rx,
    vm.traffic.tx,
    ...vm.seedFiles.map((f) => f.file),
  ];
  for (const file of [...files, ...vm.dataDisks.map((d) => d.file)]) {
    // QEMU splits option values at commas; our paths never hold one (checked, not escaped).
    if (file.includes(',')) throw new Error(`qemu driver: path ${file} holds a comma`);
  }
  const netdev =
    vm.nic.kind === 'tap'
      ? ['tap', 'id=net0', `ifname=${vm.nic.ifname}`, 'script=no', 'downscript=no', 'vnet_hdr=off'].join(',')
      : userNetdev(vm, vm.nic.ssh);
  const args = [
    '-name',
    `guest=${vm.id},debug-threads=on`,
    '-machine',
    'pc',
    '-accel',
    vm.accel,
    // TCG: QEMU's default model; emulating `max` (AVX and friends) costs boot time.
    ...(vm.accel === 'kvm' ? KVM_CPU : []),
    '-smp',
    String(vm.vcpus),
    '-m',
    String(vm.memoryMb),
    '-nodefaults',
    '-no-user-config',
    '-display',
    'none',
    '-sandbox',
    'on,obsolete=deny,spawn=allow,resourcecontrol=deny',
    '-daemonize',
    '-pidfile',
    vm.pidFile,
    '-qmp',
    `unix:${vm.qmpSocket},server=on,wait=off`,
    '-chardev',
    `file,id=serial0,path=${vm.serialLog},append=on`,
    '-serial',
    'chardev:serial0',
    '-no-shutdown',
    '-rtc',
    'base=utc',
    '-blockdev',
    `driver=qcow2,node-name=root,discard=unmap,file.driver=file,file.filename=${vm.rootDisk},file.aio=threads`,
    '-device',
    `virtio-blk-pci,drive=root,id=root-disk,bus=pci.0,addr=${hex(SLOTS.root)},serial=${diskSerial(vm.id)},bootindex=1`,
    '-netdev',
    netdev,
    '-device',
    `virtio-net-pci,netdev=net0,mac=${vm.mac},bus=pci.0,addr=${hex(SLOTS.net)}`,
    '-chardev',
    `socket,id=traffic-rx,path=${vm.traffic.rx},reconnect=1`,
    '-chardev',
    `socket,id=traffic-tx,path=${vm.traffic.tx},reconnect=1`,
    '-object',
    'filter-mirror,id=mirror-rx,netdev=net0,queue=tx,outdev=traffic-rx',
    '-object',
    'filter-mirror,id=mirror-tx,netdev=net0,queue=rx,outdev=traffic-tx',
    '-device',
    `virtio-balloon-pci,id=balloon0,bus=pci.0,addr=${hex(SLOTS.balloon)}`,
    '-device',
    `virtio-rng-pci,bus=pci.0,addr=${hex(SLOTS.rng)}`,
  ];
  for (const disk of [...vm.dataDisks].sort((a, b) => a.deviceName.localeCompare(b.deviceName))) {
    args.push(
      '-blockdev',
      `driver=qcow2,node-name=${dataNode(disk.id)},discard=unmap,file.driver=file,file.filename=${disk.file},file.aio=threads`,
      '-device',
      `virtio-blk-pci,drive=${dataNode(disk.id)},id=${dataDevice(disk.id)},bus=pci.0,addr=${hex(dataDiskSlot(disk.deviceName))},serial=${diskSerial(disk.id)}`,
    );
  }
  if (vm.image.kind === 'nimbus') {
    args.push('-kernel', vm.image.kernel, '-initrd', vm.image.initrd, '-append', vm.image.cmdline);
    for (const seed of vm.seedFiles) args.push('-fw_cfg', `name=opt/nimbus/${seed.name},file=${seed.file}`);
  } else {
    // cloud-init finds its NoCloud seed on the CD-ROM labelled cidata.
    args.push(
      '-blockdev',
      `driver=raw,node-name=seed,read-only=on,file.driver=file,file.filename=${vm.seedIso}`,
      '-device',
      'ide-cd,drive=seed,bus=ide.1,unit=0',
    );
  }
  return args;
}
