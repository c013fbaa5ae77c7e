/**
 * What `npm test` needs on this machine beyond node_modules and dist/, made ready before any suite runs
 * (npm runs it in `pretest`, after the build), so the README's command gives a newcomer the run CI gets:
 *
 * 1. Debian packages (the suites' outside programs: shells, browser, QEMU, PostgreSQL…): the missing ones
 *    are installed in one apt-get run when this runs as root; otherwise it names them and the command.
 * 2. PostgreSQL and Redis, when installed but not answering, are started (as root), and PostgreSQL gets
 *    the database `test`; a PostgreSQL installed here by this run trusts loopback connections.
 * 3. The qemu suites' guest image, built into NIMBUS_TEST_IMAGE_DIR (default /var/cache/nimbus-images),
 *    outside the clone so it outlives it; a build whose recipe is already there does nothing.
 *
 * Under CI=true anything it cannot make ready fails the run (exit 1); elsewhere it says which suites
 * will skip and carries on. When everything is there it changes nothing and takes a few seconds.
 *
 *   node scripts/test-setup.mjs           make ready what is missing (npm test runs this)
 *   node scripts/test-setup.mjs --check   only report what is missing; change nothing
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Each Debian package the suites need, with what shows it is installed: programs (on PATH or in an
 * sbin directory) or files, all of which must be there.
 */
export const REQUIREMENTS = [
  { package: 'postgresql', programs: ['pg_ctlcluster'], for: 'the PostgreSQL store suites' },
  {
    package: 'redis-server',
    programs: ['redis-server'],
    for: 'the Redis suites (shared rate limits, notices)',
  },
  { package: 'wireguard-tools', programs: ['wg', 'wg-quick'], for: 'the VPN suites' },
  {
    package: 'wireguard-go',
    programs: ['wireguard-go'],
    for: 'VPN gateways on OVN (this kernel has no WireGuard module) and the VPN suites on OVN',
  },
  { package: 'haproxy', programs: ['haproxy'], for: 'the load-balancer suite' },
  { package: 'poppler-utils', programs: ['pdftotext'], for: 'the invoice PDF suites' },
  {
    package: 'fonts-dejavu-core',
    files: ['/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf'],
    for: 'the invoice PDF suites',
  },
  { package: 'zsh', programs: ['zsh'], for: 'the CLI completion suite' },
  { package: 'fish', programs: ['fish'], for: 'the CLI completion suite' },
  { package: 'openssl', programs: ['openssl'], for: "the README's CLI steps" },
  { package: 'chromium', files: ['/usr/bin/chromium'], for: 'the web console suites' },
  { package: 'qemu-system-x86', programs: ['qemu-system-x86_64'], for: 'the QEMU suites' },
  { package: 'qemu-utils', programs: ['qemu-img'], for: 'the QEMU suites and the image build' },
  { package: 'socat', programs: ['socat'], for: 'the QEMU suites' },
  { package: 'genisoimage', programs: ['genisoimage'], for: 'the QEMU suites' },
  { package: 'bind9-dnsutils', programs: ['dig'], for: 'the DNS server suites' },
  { package: 'openssh-client', programs: ['ssh', 'ssh-keygen'], for: 'the QEMU and SSH key suites' },
  { package: 'e2fsprogs', programs: ['mke2fs', 'debugfs'], for: 'the QEMU suites and the image build' },
  { package: 'xfsprogs', programs: ['mkfs.xfs'], for: 'the QEMU volume suites' },
  {
    package: 'openvswitch-switch',
    programs: ['ovsdb-server', 'ovs-vswitchd', 'ovs-vsctl', 'ovs-appctl'],
    for: 'the OVN network suites',
  },
  { package: 'ovn-central', programs: ['ovn-northd', 'ovn-nbctl'], for: 'the OVN network suites' },
  { package: 'ovn-host', programs: ['ovn-controller'], for: 'the OVN network suites' },
  { package: 'ethtool', programs: ['ethtool'], for: 'the OVN network suites' },
  { package: 'iproute2', programs: ['ip'], for: 'the OVN network suites' },
  { package: 'iputils-ping', programs: ['ping'], for: 'the OVN network suites' },
  { package: 'udhcpc', programs: ['udhcpc'], for: "the OVN network suites (OVN's DHCP)" },
];

/** The packages of `requirements` not installed, judged by `has.program(name)` and `has.file(path)`. */
export function missingPackages(requirements, has) {
  return requirements.filter(
    (r) => !(r.programs ?? []).every((p) => has.program(p)) || !(r.files ?? []).every((f) => has.file(f)),
  );
}

/** The one command that installs `packages` on Debian, as a person would type it. */
export function installCommand(packages, { root: asRoot }) {
  const names = packages.map((r) => r.package).join(' ');
  return `${asRoot ? '' : 'sudo '}apt-get install -y --no-install-recommends ${names}`;
}

const SBIN_DIRS = ['/usr/local/sbin', '/usr/sbin', '/sbin'];

/**
 * Where `command -v` would find `program`, or null. The sbin directories count too: a non-root PATH
 * often lacks them while the suites run haproxy, mke2fs and mkfs.xfs from there.
 */
export function findProgram(program, pathVariable = process.env.PATH ?? '', extraDirs = SBIN_DIRS) {
  const dirs = [...pathVariable.split(path.delimiter).filter(Boolean), ...extraDirs];
  for (const dir of dirs) {
    const candidate = path.join(dir, program);
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return null;
}

const here = { program: (p) => findProgram(p) !== null, file: (f) => existsSync(f) };

function say(line) {
  process.stdout.write(`test-setup: ${line}\n`);
}

/** Runs a command with its errors shown (and its output, unless `quiet`); true when it exits 0. */
function runShown(command, args, { env = process.env, quiet = false } = {}) {
  const result = spawnSync(command, args, {
    stdio: ['ignore', quiet ? 'ignore' : 'inherit', 'inherit'],
    env,
  });
  return result.status === 0;
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` within a second. */
function listening(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, timeout: 1000 });
    const done = (answer) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once('connect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}

async function waitListening(port, seconds = 30) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (await listening(port)) return true;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return false;
}

function installPackages(missing, { check, asRoot }, problems) {
  if (missing.length === 0) return false;
  for (const r of missing) say(`missing ${r.package} (${r.for})`);
  const command = installCommand(missing, { root: asRoot });
  const canInstall = asRoot && !check && findProgram('apt-get') !== null;
  if (!canInstall) {
    problems.add(`Debian packages missing: ${missing.map((r) => r.package).join(' ')}`, `run: ${command}`);
    return false;
  }
  say(`installing: ${command}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // dpkg's progress lines would bury the test output; its errors go to stderr and stay.
  const names = missing.map((r) => r.package);
  const installed =
    runShown('apt-get', ['update', '-qq'], { env, quiet: true }) &&
    runShown('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...names], { env, quiet: true });
  if (installed) say(`installed ${names.join(' ')}`);
  else problems.add('apt-get install failed', `run: ${command}`);
  return installed;
}

/** The installed cluster's version directory under /etc/postgresql (Debian's layout), or null. */
function postgresVersion() {
  try {
    return readdirSync('/etc/postgresql').sort().at(-1) ?? null;
  } catch {
    return null;
  }
}

async function preparePostgres({ check, asRoot, freshlyInstalled }, problems) {
  // The suites may be pointed at a PostgreSQL elsewhere: that one is not ours to start.
  if (process.env.NIMBUS_TEST_POSTGRES_URL || !findProgram('pg_ctlcluster')) return;
  const version = postgresVersion();
  const ctl = ['--skip-systemctl-redirect', version ?? '?', 'main'];
  if (freshlyInstalled && version && !check) {
    // The suites connect as postgres over loopback without a password, as on the machines CI runs on;
    // a fresh Debian cluster asks for one.
    const hba = `/etc/postgresql/${version}/main/pg_hba.conf`;
    runShown('sed', ['-i', '1i host all all 127.0.0.1/32 trust\\nhost all all ::1/128 trust', hba]);
    spawnSync('pg_ctlcluster', [...ctl, 'reload'], { stdio: 'ignore' });
  }
  if (!(await listening(5432))) {
    const start = `pg_ctlcluster ${ctl.join(' ')} start`;
    if (!asRoot || check || !version) {
      problems.add('PostgreSQL is installed but not running on 127.0.0.1:5432', `run as root: ${start}`);
      return;
    }
    say(`starting PostgreSQL: ${start}`);
    if (!runShown('pg_ctlcluster', [...ctl, 'start']) || !(await waitListening(5432))) {
      problems.add('PostgreSQL did not start', `run as root: ${start}`);
      return;
    }
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({
    connectionString: 'postgres://postgres@127.0.0.1:5432/postgres',
    connectionTimeoutMillis: 5000,
  });
  try {
    await client.connect();
    const { rowCount } = await client.query("select 1 from pg_database where datname = 'test'");
    if (rowCount === 0) {
      if (check)
        problems.add('PostgreSQL has no database test', 'run: createdb -h 127.0.0.1 -U postgres test');
      else {
        say('creating the PostgreSQL database test');
        await client.query('create database test');
      }
    }
  } catch (error) {
    problems.add(
      `PostgreSQL does not let postgres in from 127.0.0.1 without a password (${error.message})`,
      'trust loopback connections in pg_hba.conf (host all all 127.0.0.1/32 trust), or set NIMBUS_TEST_POSTGRES_URL',
    );
  } finally {
    await client.end().catch(() => {});
  }
}

async function prepareRedis({ check, asRoot }, problems) {
  if (process.env.NIMBUS_TEST_REDIS_URL || !findProgram('redis-server')) return;
  if (await listening(6379)) return;
  const args = [
    '--daemonize',
    'yes',
    '--bind',
    '127.0.0.1',
    '-::1',
    '--port',
    '6379',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    '/var/lib/redis',
    '--logfile',
    '/var/log/redis/ci.log',
  ];
  const shown = `redis-server ${args.map((a) => (a === '' ? '""' : a)).join(' ')}`;
  if (!asRoot || check) {
    problems.add('Redis is installed but not running on 127.0.0.1:6379', `run as root: ${shown}`);
    return;
  }
  say(`starting Redis: ${shown}`);
  mkdirSync('/var/lib/redis', { recursive: true });
  mkdirSync('/var/log/redis', { recursive: true });
  if (!runShown('redis-server', args) || !(await waitListening(6379))) {
    problems.add('Redis did not start', `run as root: ${shown}`);
  }
}

async function prepareImage({ check }, problems) {
  const imageDir = process.env.NIMBUS_TEST_IMAGE_DIR ?? '/var/cache/nimbus-images';
  const build = `NIMBUS_IMAGE_DIR=${imageDir} node bin/nimbus admin images build`;
  let images;
  try {
    images = await import(pathToFileURL(path.join(root, 'dist', 'drivers', 'qemu', 'images.js')).href);
  } catch {
    problems.add('no build in dist/ to build the guest image with', 'run: npm run build');
    return;
  }
  // The build's own check, on PATH alone as it runs them.
  const lacking = Object.keys(images.BUILD_TOOLS).filter(
    (p) => findProgram(p, process.env.PATH, []) === null,
  );
  if (lacking.length > 0) {
    problems.add(
      `no guest image can be built here (${lacking.join(', ')} missing)`,
      'install the packages above',
    );
    return;
  }
  if (check) {
    if (!existsSync(path.join(imageDir, 'debian-12', 'current')))
      problems.add(`no guest image in ${imageDir}`, `run: ${build}`);
    return;
  }
  try {
    mkdirSync(imageDir, { recursive: true, mode: 0o700 });
    accessSync(imageDir, constants.W_OK);
  } catch {
    problems.add(
      `cannot write the guest image to ${imageDir}`,
      `run as root: ${build}, or set NIMBUS_TEST_IMAGE_DIR`,
    );
    return;
  }
  say(`guest image: ${build}`);
  const env = { ...process.env, NIMBUS_IMAGE_DIR: imageDir };
  if (!runShown(process.execPath, [path.join(root, 'bin', 'nimbus'), 'admin', 'images', 'build'], { env })) {
    problems.add('the guest image build failed (its output is above)', `run: ${build}`);
  }
}

async function main(argv) {
  const check = argv.includes('--check');
  const asRoot = process.getuid?.() === 0;
  const ci = process.env.CI === 'true';
  // What could not be made ready, each with what to do about it.
  const problems = { list: [], add: (what, remedy) => problems.list.push({ what, remedy }) };
  const started = Date.now();

  const missing = missingPackages(REQUIREMENTS, here);
  const installed = installPackages(missing, { check, asRoot }, problems);
  const freshlyInstalled = installed && missing.some((r) => r.package === 'postgresql');
  await preparePostgres({ check, asRoot, freshlyInstalled }, problems);
  await prepareRedis({ check, asRoot }, problems);
  await prepareImage({ check }, problems);

  if (problems.list.length === 0) {
    say(`ready (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return 0;
  }
  process.stderr.write('\ntest-setup: not ready for every suite:\n');
  for (const { what, remedy } of problems.list) process.stderr.write(`  - ${what}\n      ${remedy}\n`);
  if (ci) {
    process.stderr.write('CI=true: every suite must run, so this fails.\n');
    return 1;
  }
  process.stderr.write('The suites that need these will be skipped (under CI=true they fail).\n\n');
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  process.exitCode = await main(process.argv.slice(2));
}
