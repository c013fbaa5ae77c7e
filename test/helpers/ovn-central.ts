/**
 * An operator's OVN, as docs/operations.md ("An existing OVN central") has one set up, for the suite that
 * points Nimbus at it: a central (the northbound and southbound ovsdb-servers listening on TCP, and
 * ovn-northd) and a chassis (an Open vSwitch with ovn-controller on an integration bridge of the test's
 * own name, not br-int), started here with the operator's commands, not by Nimbus. Everything lives in
 * one temporary directory (every daemon's run, log and database directory, so nothing touches the host's
 * /var/run/openvswitch); `stop` ends every daemon and deletes the bridge's tap, also after a failure.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { OvnEndpoints } from '../../src/drivers/ovn/daemons.js';
import { waitFor } from './common.js';
import { processesNaming, sh, succeeds } from './ovn.js';
import { freePort } from './server.js';

const DAEMONS = ['ovnnb', 'ovnsb', 'ovn-northd', 'ovsdb-server', 'ovs-vswitchd', 'ovn-controller'] as const;
type DaemonName = (typeof DAEMONS)[number];

export class OperatorOvn {
  private constructor(
    readonly dir: string,
    /** The central's databases, and this chassis' switch database and integration bridge. */
    readonly endpoints: OvnEndpoints,
    readonly chassis: string,
  ) {}

  /** Starts the central and the chassis in `dir` (made when absent); stops what it started if one fails. */
  static async start(dir: string, options: { bridge: string; chassis: string }): Promise<OperatorOvn> {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C' };
    for (const project of ['OVS', 'OVN']) {
      for (const kind of ['RUNDIR', 'LOGDIR', 'DBDIR', 'SYSCONFDIR']) env[`${project}_${kind}`] = dir;
    }
    const [nbPort, sbPort] = [await freePort(), await freePort()];
    const ovn = new OperatorOvn(
      dir,
      {
        nbUrl: `tcp:127.0.0.1:${nbPort}`,
        sbUrl: `tcp:127.0.0.1:${sbPort}`,
        ovsDb: `unix:${path.join(dir, 'db.sock')}`,
        integrationBridge: options.bridge,
        env,
      },
      options.chassis,
    );
    try {
      ovn.startAll(nbPort, sbPort);
      await waitFor(
        `chassis ${options.chassis} registered in the southbound database`,
        () =>
          ovn.sbctl('--bare', '--columns=name', 'list', 'Chassis').includes(options.chassis)
            ? true
            : undefined,
        { timeoutMs: 60_000, intervalMs: 200 },
      );
    } catch (error) {
      ovn.stop();
      throw error;
    }
    return ovn;
  }

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  /** What each daemon gets: its pidfile, log file and control socket in the directory, detached once ready. */
  private daemonArgs(name: DaemonName): string[] {
    return [
      `--pidfile=${this.file(`${name}.pid`)}`,
      `--log-file=${this.file(`${name}.log`)}`,
      // ovn-controller takes no --unixctl: its control socket goes to OVN_RUNDIR.
      ...(name === 'ovn-controller' ? [] : [`--unixctl=${this.file(`${name}.ctl`)}`]),
      '--no-chdir',
      '--detach',
      '-vconsole:off',
    ];
  }

  private startAll(nbPort: number, sbPort: number): void {
    const { env, nbUrl, sbUrl, ovsDb, integrationBridge: bridge } = this.endpoints;
    const database = (name: DaemonName, db: string, schema: string, remote: string) => {
      if (!existsSync(this.file(db))) sh('ovsdb-tool', ['create', this.file(db), schema], env);
      sh('ovsdb-server', [this.file(db), `--remote=${remote}`, ...this.daemonArgs(name)], env);
    };
    // The central: the two databases on TCP, as a central other hosts reach is, and northd between them.
    database('ovnnb', 'ovnnb.db', '/usr/share/ovn/ovn-nb.ovsschema', `ptcp:${nbPort}:127.0.0.1`);
    database('ovnsb', 'ovnsb.db', '/usr/share/ovn/ovn-sb.ovsschema', `ptcp:${sbPort}:127.0.0.1`);
    sh('ovn-northd', [`--ovnnb-db=${nbUrl}`, `--ovnsb-db=${sbUrl}`, ...this.daemonArgs('ovn-northd')], env);
    // The chassis: Open vSwitch on the userspace datapath (no kernel module here), its integration bridge,
    // and ovn-controller told the central and the bridge.
    database(
      'ovsdb-server',
      'conf.db',
      '/usr/share/openvswitch/vswitch.ovsschema',
      `punix:${this.file('db.sock')}`,
    );
    this.vsctl('--no-wait', 'init');
    sh('ovs-vswitchd', [ovsDb, ...this.daemonArgs('ovs-vswitchd')], env);
    this.vsctl(
      '--may-exist',
      'add-br',
      bridge,
      '--',
      'set',
      'Bridge',
      bridge,
      'datapath_type=netdev',
      'fail-mode=secure',
    );
    this.vsctl(
      'set',
      'Open_vSwitch',
      '.',
      `external_ids:system-id=${this.chassis}`,
      `external_ids:ovn-remote=${sbUrl}`,
      'external_ids:ovn-encap-type=geneve',
      'external_ids:ovn-encap-ip=127.0.0.1',
      `external_ids:ovn-bridge=${bridge}`,
      'external_ids:ovn-bridge-datapath-type=netdev',
    );
    sh('ovn-controller', [ovsDb, ...this.daemonArgs('ovn-controller')], env);
  }

  vsctl(...args: string[]): string {
    return sh('ovs-vsctl', [`--db=${this.endpoints.ovsDb}`, '--timeout=30', ...args], this.endpoints.env);
  }

  nbctl(...args: string[]): string {
    return sh('ovn-nbctl', [`--db=${this.endpoints.nbUrl}`, '--timeout=30', ...args], this.endpoints.env);
  }

  sbctl(...args: string[]): string {
    return sh('ovn-sbctl', [`--db=${this.endpoints.sbUrl}`, '--timeout=30', ...args], this.endpoints.env);
  }

  /** The pid of each daemon running now, by name (from its pidfile, checked alive). */
  pids(): Map<DaemonName, number> {
    const found = new Map<DaemonName, number>();
    for (const name of DAEMONS) {
      try {
        const pid = Number(sh('cat', [this.file(`${name}.pid`)]).trim());
        if (pid > 0 && succeeds('kill', ['-0', String(pid)])) found.set(name, pid);
      } catch {
        // no pidfile: not running
      }
    }
    return found;
  }

  /** Ends every daemon (vswitchd asked to clean its datapath up first) and deletes the bridge's tap; safe twice. */
  stop(): void {
    succeeds('ovs-appctl', [`--target=${this.file('ovs-vswitchd.ctl')}`, 'exit', '--cleanup']);
    for (const pid of processesNaming(this.dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    const bridge = this.endpoints.integrationBridge;
    if (existsSync(`/sys/class/net/${bridge}`)) succeeds('ip', ['link', 'del', bridge]);
  }

  /** stop, then the directory removed. */
  remove(): void {
    this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
