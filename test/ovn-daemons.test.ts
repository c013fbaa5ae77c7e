/**
 * The embedded OVN's daemons (issue 31 item 1): started under a private directory, a daemon that dies
 * is started again, and none is left behind when it closes — not even one a Nimbus killed with -9
 * left running, which the next Nimbus finds by its pidfile, adopts, and stops when it closes. And the
 * check `serve` makes: each missing program named with its Debian package.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EmbeddedOvn, missingOvnPrograms } from '../src/drivers/ovn/daemons.js';
import { describeMissing } from '../src/drivers/qemu/tools.js';
import { ensureBuilt, ROOT } from './helpers/cli.js';
import { waitFor } from './helpers/common.js';
import { CAN_RUN_OVN, oneOvnSuiteAtATime, processesNaming } from './helpers/ovn.js';

const DAEMONS = ['ovsdb-server', 'ovs-vswitchd', 'ovnnb', 'ovnsb', 'ovn-northd', 'ovn-controller'];
const dirs: string[] = [];
const opened: EmbeddedOvn[] = [];

afterEach(async () => {
  for (const ovn of opened.splice(0)) await ovn.close();
  for (const dir of dirs.splice(0)) {
    for (const pid of processesNaming(dir)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

function tempDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-ovn-daemons-'));
  dirs.push(dir);
  return dir;
}

describe('the programs the embedded OVN needs', () => {
  it('names each missing one with the Debian package that installs it', () => {
    const missing = missingOvnPrograms(path.join(os.tmpdir(), 'no-such-directory'));
    expect(missing.flatMap((need) => need.programs)).toEqual(
      expect.arrayContaining([
        'ovsdb-server',
        'ovs-vswitchd',
        'ovn-northd',
        'ovn-controller',
        'ethtool',
        'ip',
      ]),
    );
    expect(describeMissing(missing)).toMatch(
      /ovn-controller \(Debian package ovn-host\).*install them with: apt-get install .*openvswitch-switch.*ovn-central.*ovn-host/,
    );
  });
});

describe.runIf(CAN_RUN_OVN)('the embedded OVN daemons', () => {
  oneOvnSuiteAtATime();
  it('runs every daemon, starts again one that dies, and leaves nothing behind when closed', async () => {
    const dir = tempDir();
    const restarted: string[] = [];
    const ovn = await EmbeddedOvn.start({
      dir,
      chassis: 'ovn-daemons-test',
      superviseMs: 100,
      onRestart: (daemon, error) => restarted.push(error ? `${daemon}: ${error.message}` : daemon),
    });
    opened.push(ovn);
    const pids = ovn.pids();
    expect([...pids.keys()]).toEqual(DAEMONS);
    for (const name of ['conf.db', 'ovnnb.db', 'ovnsb.db', 'db.sock', 'nb.sock', 'sb.sock']) {
      expect(existsSync(path.join(dir, name))).toBe(true);
    }

    process.kill(pids.get('ovn-northd')!, 'SIGKILL');
    await waitFor('ovn-northd started again', () => (restarted.length > 0 ? true : undefined));
    expect(restarted).toEqual(['ovn-northd']);
    expect(ovn.pids().get('ovn-northd')).not.toBe(pids.get('ovn-northd'));

    await ovn.close();
    expect(processesNaming(dir)).toEqual([]);
    expect(existsSync(`/sys/class/net/${ovn.endpoints.integrationBridge}`)).toBe(false);
  });

  it('adopts the daemons of a Nimbus killed with -9 and stops them when it closes', async () => {
    ensureBuilt();
    const dir = tempDir();
    const module = path.join(ROOT, 'dist', 'drivers', 'ovn', 'daemons.js');
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { EmbeddedOvn } = await import(${JSON.stringify(module)});
         await EmbeddedOvn.start({ dir: ${JSON.stringify(dir)}, chassis: 'killed' });
         process.stdout.write('ready\\n');
         setInterval(() => {}, 60_000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    await waitFor(
      'the first server to start its daemons',
      () => (output.includes('ready') ? true : undefined),
      {
        timeoutMs: 30_000,
        intervalMs: 50,
      },
    );
    child.kill('SIGKILL');
    await once(child, 'exit');
    const left = processesNaming(dir);
    expect(left.length).toBe(DAEMONS.length);

    const ovn = await EmbeddedOvn.start({ dir, chassis: 'killed' });
    opened.push(ovn);
    expect(new Set(ovn.pids().values())).toEqual(new Set(left));
    await ovn.close();
    expect(processesNaming(dir)).toEqual([]);
    expect(existsSync(`/sys/class/net/${ovn.endpoints.integrationBridge}`)).toBe(false);
  });
});
