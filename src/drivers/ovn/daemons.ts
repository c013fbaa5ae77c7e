/**
 * The embedded OVN (docs/operations.md, "OVN"): with no NIMBUS_OVN_NB_URL, Nimbus runs Open vSwitch and
 * OVN itself under `<data dir>/ovn` — the switch database (conf.db) and ovs-vswitchd on the userspace
 * datapath, the northbound and southbound databases, ovn-northd and ovn-controller — so one host needs
 * nothing but the Debian packages.
 *
 * Every daemon and every client gets the private directory as its run, log and database directory
 * (without it they look in /var/run/openvswitch and die), and each daemon is started with --detach: the
 * command returns once the daemon is ready, and the daemon lives on by itself, found again by its
 * pidfile. So a Nimbus killed with -9 leaves its daemons running, and the next one adopts them (its
 * VMs keep their network across the restart) and stops them when it closes. A daemon that dies is
 * started again by the supervisor's poll.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isOurProcess, readPidFile, waitForExit } from '../qemu/process.js';
import { missingPrograms, type ProgramNeed, run } from '../qemu/tools.js';
import { OvsdbConnection } from './northbound.js';

/**
 * The `ovs-vsctl` words that add `bridge` on the userspace datapath (this kernel has no OVS module), or
 * leave it as it is; more `Bridge` settings may follow them.
 */
export function addNetdevBridge(bridge: string): string[] {
  return ['--may-exist', 'add-br', bridge, '--', 'set', 'Bridge', bridge, 'datapath_type=netdev'];
}

/** Every program the embedded OVN and its VPCs run, with the Debian package that installs it. */
export const OVN_PROGRAMS: readonly ProgramNeed[] = [
  { programs: ['ovsdb-server'], debianPackage: 'openvswitch-common' },
  { programs: ['ovs-vswitchd'], debianPackage: 'openvswitch-switch' },
  { programs: ['ovsdb-tool'], debianPackage: 'openvswitch-common' },
  { programs: ['ovs-vsctl'], debianPackage: 'openvswitch-switch' },
  { programs: ['ovs-appctl'], debianPackage: 'openvswitch-common' },
  // The provider bridge's counting flows (transfer-flows.ts).
  { programs: ['ovs-ofctl'], debianPackage: 'openvswitch-common' },
  { programs: ['ovn-northd'], debianPackage: 'ovn-central' },
  { programs: ['ovn-controller'], debianPackage: 'ovn-host' },
  { programs: ['ovn-nbctl'], debianPackage: 'ovn-common' },
  // Finding the router policies' logical flows, whose cookies count instances without a public IP
  // (snat-transfer.ts).
  { programs: ['ovn-sbctl'], debianPackage: 'ovn-common' },
  // Transmit checksum offload off on veths and taps: the userspace datapath's conntrack drops packets
  // whose checksum the kernel left to the (absent) hardware.
  { programs: ['ethtool'], debianPackage: 'ethtool' },
  { programs: ['ip'], debianPackage: 'iproute2' },
  // VPN gateways (vpn-gateways.ts): the userspace WireGuard (this kernel has no module) and `wg` for its keys and peers.
  { programs: ['wireguard-go'], debianPackage: 'wireguard-go' },
  { programs: ['wg'], debianPackage: 'wireguard-tools' },
];

/** The programs of OVN_PROGRAMS not installed here (`serve` refuses to start naming their packages). */
export function missingOvnPrograms(pathVariable?: string): ProgramNeed[] {
  return missingPrograms(OVN_PROGRAMS, pathVariable);
}

const SCHEMAS = {
  conf: '/usr/share/openvswitch/vswitch.ovsschema',
  nb: '/usr/share/ovn/ovn-nb.ovsschema',
  sb: '/usr/share/ovn/ovn-sb.ovsschema',
};

/** The sockets a client of this OVN uses, the same whether Nimbus runs it or an operator does. */
export interface OvnEndpoints {
  /** OVSDB remote of the northbound database (`unix:…`, `tcp:…`). */
  nbUrl: string;
  sbUrl: string;
  /** OVSDB remote of this host's Open vSwitch database. */
  ovsDb: string;
  /** The integration bridge ovn-controller wires logical ports into (ports join it by external_ids:iface-id). */
  integrationBridge: string;
  /** Environment for ovs-vsctl, ovn-nbctl and the like: the private run dir among the rest. */
  env: NodeJS.ProcessEnv;
}

export interface EmbeddedOvnOptions {
  /** `<data dir>/ovn`: databases, sockets, pidfiles and logs. */
  dir: string;
  /** This host's chassis name in the southbound database; default: the host name. */
  chassis?: string;
  /** Milliseconds between two looks at the daemons' pids. */
  superviseMs?: number;
  /** Told when a daemon was found dead and started again. */
  onRestart?: (daemon: string, error: Error | null) => void;
}

interface Daemon {
  name: string;
  pidFile: string;
  start: () => Promise<void>;
  /** Asks the daemon to exit (it is signalled when this fails or it does not go). */
  stop?: () => Promise<void>;
}

/**
 * The interface name of the integration bridge: its own per directory, because on the userspace datapath
 * the bridge's local port is a kernel tap of the bridge's name, and two embedded OVNs on one host (two
 * servers, or a server and a test) must not fight over one `br-int`. 15 characters at most (IFNAMSIZ).
 */
export function integrationBridgeName(dir: string): string {
  return `nbr-${createHash('sha256').update(path.resolve(dir)).digest('hex').slice(0, 8)}`;
}

export class EmbeddedOvn {
  readonly endpoints: OvnEndpoints;
  private readonly dir: string;
  /** This host's chassis name in the southbound database. */
  readonly chassis: string;
  private readonly daemons: Daemon[];
  private readonly onRestart: EmbeddedOvnOptions['onRestart'];
  private readonly superviseMs: number;
  private supervisor: NodeJS.Timeout | null = null;
  private supervising: Promise<void> | null = null;
  private closed = false;
  /** When each daemon may next be restarted: a daemon that dies at once is retried ever more slowly. */
  private readonly backoff = new Map<string, { at: number; delayMs: number }>();

  /** Starts (or adopts, after a kill -9 of the previous server) every daemon and begins supervising. */
  static async start(options: EmbeddedOvnOptions): Promise<EmbeddedOvn> {
    const ovn = new EmbeddedOvn(options);
    try {
      await ovn.startAll();
      await ovn.waitForChassis();
    } catch (error) {
      await ovn.close();
      throw error;
    }
    ovn.supervise();
    return ovn;
  }

  private constructor(options: EmbeddedOvnOptions) {
    const dir = path.resolve(options.dir);
    this.dir = dir;
    this.onRestart = options.onRestart;
    this.superviseMs = options.superviseMs ?? 1000;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C' };
    for (const project of ['OVS', 'OVN']) {
      for (const kind of ['RUNDIR', 'LOGDIR', 'DBDIR', 'SYSCONFDIR']) env[`${project}_${kind}`] = dir;
    }
    const file = (name: string) => path.join(dir, name);
    const bridge = integrationBridgeName(dir);
    this.endpoints = {
      nbUrl: `unix:${file('nb.sock')}`,
      sbUrl: `unix:${file('sb.sock')}`,
      ovsDb: `unix:${file('db.sock')}`,
      integrationBridge: bridge,
      env,
    };
    const chassis = options.chassis ?? os.hostname();
    this.chassis = chassis;
    const tool = (program: string, args: readonly string[]) => run(program, args, { env, timeoutMs: 30_000 });
    const vsctl = (...args: string[]) => tool('ovs-vsctl', [`--db=${this.endpoints.ovsDb}`, ...args]);
    /** --detach returns once the daemon is ready; the rest of each command line is the same for all. */
    const daemonArgs = (name: string, unixctl: boolean) => [
      `--pidfile=${file(`${name}.pid`)}`,
      `--log-file=${file(`${name}.log`)}`,
      ...(unixctl ? [`--unixctl=${file(`${name}.ctl`)}`] : []),
      '--no-chdir',
      '--detach',
      '-vconsole:off',
    ];
    const database = async (daemonName: string, dbFile: string, schema: string, socket: string) => {
      const db = file(dbFile);
      if (!existsSync(db)) await tool('ovsdb-tool', ['create', db, schema]);
      await tool('ovsdb-server', [db, `--remote=punix:${file(socket)}`, ...daemonArgs(daemonName, true)]);
    };
    const daemon = (name: string, start: () => Promise<void>, stop?: () => Promise<void>): Daemon => ({
      name,
      pidFile: file(`${name}.pid`),
      start,
      ...(stop ? { stop } : {}),
    });
    this.daemons = [
      daemon('ovsdb-server', async () => {
        await database('ovsdb-server', 'conf.db', SCHEMAS.conf, 'db.sock');
        await vsctl('--no-wait', 'init');
      }),
      daemon(
        'ovs-vswitchd',
        async () => {
          await tool('ovs-vswitchd', [this.endpoints.ovsDb, ...daemonArgs('ovs-vswitchd', true)]);
          // fail-mode=secure: until ovn-controller has written its flows the bridge forwards nothing.
          await vsctl(...addNetdevBridge(bridge), 'fail-mode=secure');
        },
        async () => {
          // --cleanup: on the userspace datapath the bridge's local port is a kernel tap that outlives a
          // plain exit.
          await tool('ovs-appctl', [`--target=${file('ovs-vswitchd.ctl')}`, 'exit', '--cleanup']);
        },
      ),
      daemon('ovnnb', () => database('ovnnb', 'ovnnb.db', SCHEMAS.nb, 'nb.sock')),
      daemon('ovnsb', () => database('ovnsb', 'ovnsb.db', SCHEMAS.sb, 'sb.sock')),
      daemon('ovn-northd', async () => {
        await tool('ovn-northd', [
          `--ovnnb-db=${this.endpoints.nbUrl}`,
          `--ovnsb-db=${this.endpoints.sbUrl}`,
          ...daemonArgs('ovn-northd', true),
        ]);
      }),
      daemon('ovn-controller', async () => {
        await vsctl(
          'set',
          'Open_vSwitch',
          '.',
          `external_ids:system-id=${chassis}`,
          `external_ids:ovn-remote=${this.endpoints.sbUrl}`,
          'external_ids:ovn-encap-type=geneve',
          'external_ids:ovn-encap-ip=127.0.0.1',
          `external_ids:ovn-bridge=${bridge}`,
          'external_ids:ovn-bridge-datapath-type=netdev',
        );
        // ovn-controller takes no --unixctl: its control socket goes to OVN_RUNDIR.
        await tool('ovn-controller', [this.endpoints.ovsDb, ...daemonArgs('ovn-controller', false)]);
      }),
    ];
  }

  /** The pid of `daemon` when it runs (its pidfile names a live process started for this directory). */
  private pidOf(daemon: Daemon): number | null {
    const pid = readPidFile(daemon.pidFile);
    return pid !== null && isOurProcess(pid, this.dir) ? pid : null;
  }

  /**
   * Waits until ovn-controller has registered this chassis in the southbound database: before that, a
   * router port bound to it (a VPC's gateway) would be applied to no host, and its first packets lost.
   */
  private async waitForChassis(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const connection = await OvsdbConnection.connect(this.endpoints.sbUrl).catch(() => null);
      try {
        const [found] = connection
          ? await connection
              .transact('OVN_Southbound', [
                { op: 'select', table: 'Chassis', where: [['name', '==', this.chassis]], columns: ['name'] },
              ])
              .catch(() => [])
          : [];
        if ((found?.rows?.length ?? 0) > 0) return;
      } finally {
        connection?.close();
      }
      if (Date.now() > deadline) {
        throw new Error(`ovn-controller did not register chassis ${this.chassis} within ${timeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async startAll(): Promise<void> {
    for (const daemon of this.daemons) {
      if (this.pidOf(daemon) === null) await this.startOne(daemon);
    }
  }

  private async startOne(daemon: Daemon): Promise<void> {
    // A pidfile left by a daemon killed with -9 would make the new one refuse to start.
    rmSync(daemon.pidFile, { force: true });
    await daemon.start();
  }

  private supervise(): void {
    this.supervisor = setInterval(() => {
      if (this.supervising !== null || this.closed) return;
      this.supervising = this.restartDead().finally(() => {
        this.supervising = null;
      });
    }, this.superviseMs);
    this.supervisor.unref();
  }

  private async restartDead(): Promise<void> {
    for (const daemon of this.daemons) {
      if (this.closed) return;
      if (this.pidOf(daemon) !== null) continue;
      const now = Date.now();
      const previous = this.backoff.get(daemon.name);
      if (previous && now < previous.at) continue;
      const delayMs = Math.min((previous?.delayMs ?? 500) * 2, 30_000);
      this.backoff.set(daemon.name, { at: now + delayMs, delayMs });
      try {
        await this.startOne(daemon);
        this.onRestart?.(daemon.name, null);
      } catch (error) {
        this.onRestart?.(daemon.name, error as Error);
      }
    }
  }

  /** The pids of the daemons running now, by name (for tests and `admin network check`). */
  pids(): Map<string, number> {
    const found = new Map<string, number>();
    for (const daemon of this.daemons) {
      const pid = this.pidOf(daemon);
      if (pid !== null) found.set(daemon.name, pid);
    }
    return found;
  }

  /** Stops every daemon, the last started first, and waits until none is left. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.supervisor) clearInterval(this.supervisor);
    await this.supervising;
    for (const daemon of [...this.daemons].reverse()) {
      const pid = this.pidOf(daemon);
      if (pid === null) continue;
      const asked = await daemon.stop?.().then(
        () => true,
        () => false,
      );
      if (!asked) signal(pid, 'SIGTERM');
      if (!(await waitForExit(pid, this.dir, 5000))) {
        signal(pid, 'SIGKILL');
        await waitForExit(pid, this.dir, 5000);
      }
      rmSync(daemon.pidFile, { force: true });
    }
    // A vswitchd that was killed (not asked to exit) leaves the bridge's tap behind.
    const bridge = this.endpoints.integrationBridge;
    if (existsSync(`/sys/class/net/${bridge}`)) await run('ip', ['link', 'del', bridge]).catch(() => {});
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // gone meanwhile
  }
}
