/**
 * Guest images for the QEMU driver, in NIMBUS_IMAGE_DIR (default `<data dir>/images`):
 *
 * - a built image (`nimbus admin images build`): `<name>/<version>/` holding `vmlinuz`, `initrd.img`,
 *   `root.qcow2` and `manifest.json`, with `<name>/current` pointing at the newest version. Instances'
 *   disks are thin overlays on one version's `root.qcow2`, so a rebuild makes a new version beside the old
 *   one and never changes a disk an instance stands on.
 * - a cloud image an operator drops in: `<name>.qcow2` (or `.img`), booted from its own boot loader with
 *   cloud-init reading the same NoCloud seed.
 *
 * The build takes Debian packages only: the cloud kernel, busybox-static, dropbear-bin and e2fsprogs with
 * the libraries they need, fetched with `apt-get download` into a cache beside the images and unpacked
 * with `dpkg-deb -x` (never installed on the host). A version is named by the hash of its recipe (the
 * packages and their versions, the guest's files, the modules, the command line), so running the build
 * again with nothing changed finds the version there and does nothing.
 */
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { type CpioEntry, cpioArchive } from './cpio.js';
import * as guest from './guest-files.js';
import { describeMissing, missingPrograms, run, ToolError } from './tools.js';

/** Raised when the build cannot go on; the message says what to do. */
export class ImageBuildError extends Error {
  // The CLI tells it by name (src/cli/main.ts), without loading this module for every admin command.
  override readonly name = 'ImageBuildError';
}

/** The name the built image takes by default: it is Debian 12's kernel and packages. */
export const DEFAULT_IMAGE_NAME = 'debian-12';

/** Bumped when the way an image is assembled changes in a way the recipe below does not show. */
const RECIPE_FORMAT = 3;

const KERNEL_PACKAGE = 'linux-image-cloud-amd64';
const USERLAND_PACKAGES = ['busybox-static', 'dropbear-bin', 'e2fsprogs'] as const;
/** Size of the root filesystem as built; the guest grows it to its disk (the type's storage) at boot. */
const ROOT_FS_MB = 512;

/** Programs the build runs, and the Debian package each comes from. */
export const BUILD_TOOLS: Record<string, string> = {
  'apt-get': 'apt',
  'apt-cache': 'apt',
  'dpkg-deb': 'dpkg',
  mke2fs: 'e2fsprogs',
  debugfs: 'e2fsprogs',
  'qemu-img': 'qemu-utils',
};

export interface ImageManifest {
  name: string;
  version: string;
  kind: 'nimbus';
  kernel: string;
  kernel_cmdline: string;
  packages: { name: string; version: string }[];
  built_at: string;
}

/** One bootable image found in the image dir. */
export type GuestImage =
  | {
      name: string;
      kind: 'nimbus';
      version: string;
      dir: string;
      kernel: string;
      initrd: string;
      root: string;
      cmdline: string;
    }
  | { name: string; kind: 'cloud'; root: string };

const IMAGE_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** The images present in `imageDir`, by name (a built image wins over a cloud image of the same name). */
export function listImages(imageDir: string): Map<string, GuestImage> {
  const images = new Map<string, GuestImage>();
  if (!existsSync(imageDir)) return images;
  for (const entry of readdirSync(imageDir, { withFileTypes: true })) {
    const match = /^(.+)\.(qcow2|img)$/.exec(entry.name);
    if (entry.isFile() && match?.[1] && IMAGE_NAME.test(match[1])) {
      images.set(match[1], { name: match[1], kind: 'cloud', root: path.join(imageDir, entry.name) });
    }
  }
  for (const entry of readdirSync(imageDir, { withFileTypes: true })) {
    if (!entry.isDirectory() || !IMAGE_NAME.test(entry.name)) continue;
    const built = builtImage(imageDir, entry.name);
    if (built) images.set(entry.name, built);
  }
  return images;
}

/** The current version of a built image, or null when there is none (or it is incomplete). */
export function builtImage(imageDir: string, name: string, version?: string): GuestImage | null {
  const dir = path.join(imageDir, name, version ?? 'current');
  try {
    const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as ImageManifest;
    const real = path.join(imageDir, name, manifest.version);
    const files = { kernel: 'vmlinuz', initrd: 'initrd.img', root: 'root.qcow2' };
    for (const file of Object.values(files)) if (!existsSync(path.join(real, file))) return null;
    return {
      name,
      kind: 'nimbus',
      version: manifest.version,
      dir: real,
      kernel: path.join(real, files.kernel),
      initrd: path.join(real, files.initrd),
      root: path.join(real, files.root),
      cmdline: manifest.kernel_cmdline,
    };
  } catch {
    return null;
  }
}

export interface BuildOptions {
  imageDir: string;
  name?: string;
  /** Build again even when the recipe's version is there. */
  force?: boolean;
  /** One line per step, for whoever watches. */
  progress?: (line: string) => void;
}

export interface BuildResult {
  name: string;
  version: string;
  /** false: that version was already there (nothing done). */
  built: boolean;
  dir: string;
  packages: { name: string; version: string }[];
}

interface AptPackage {
  name: string;
  version: string;
  sha256: string;
  size: number;
}

/** Builds the guest image (or finds it built); see the module comment. */
export async function buildGuestImage(options: BuildOptions): Promise<BuildResult> {
  const name = options.name ?? DEFAULT_IMAGE_NAME;
  if (!IMAGE_NAME.test(name)) {
    throw new ImageBuildError(`Image names are lower-case letters, digits, ".", "_" and "-" (got "${name}")`);
  }
  const say = options.progress ?? (() => {});
  const imageDir = path.resolve(options.imageDir);
  checkTools();
  mkdirSync(imageDir, { recursive: true, mode: 0o700 });

  say('[1/6] resolving Debian packages');
  const apt = aptCacheKeptIn(path.join(imageDir, '.cache'));
  const kernelPackage = await kernelPackageName(apt);
  const userland = await dependencyClosure(apt, [...USERLAND_PACKAGES]);
  const packages = await describePackages(apt, [kernelPackage, ...userland]);
  const kernel = packages.find((p) => p.name === kernelPackage)!;
  const recipe = {
    format: RECIPE_FORMAT,
    packages: packages.map((p) => `${p.name}=${p.version}`),
    files: [
      guest.INITRAMFS_INIT,
      guest.INITTAB,
      guest.RC_S,
      guest.RC_K,
      guest.POWER_BUTTON,
      guest.UDHCPC_SCRIPT,
      guest.PASSWD,
      guest.SHADOW,
      guest.GROUP,
      guest.SHELLS,
      guest.MDEV_CONF,
      guest.PROFILE,
      guest.NSSWITCH,
      guest.HOSTS,
    ],
    modules: guest.INITRAMFS_MODULES,
    cmdline: guest.KERNEL_CMDLINE,
    rootFsMb: ROOT_FS_MB,
  };
  const version = createHash('sha256').update(JSON.stringify(recipe)).digest('hex').slice(0, 16);
  const described = packages.map((p) => ({ name: p.name, version: p.version }));
  const existing = builtImage(imageDir, name, version);
  if (existing && !options.force) {
    pointCurrent(imageDir, name, version);
    say(`Image ${name} version ${version} is up to date (${packages.length} packages); nothing to do`);
    return { name, version, built: false, dir: path.join(imageDir, name, version), packages: described };
  }

  const lock = takeLock(imageDir);
  const work = path.join(imageDir, `.build-${process.pid}`);
  try {
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true, mode: 0o700 });
    const cache = path.join(imageDir, '.cache', 'debs');
    mkdirSync(cache, { recursive: true, mode: 0o700 });

    say(`[2/6] fetching ${packages.length} packages into ${cache}`);
    const debs = await fetchPackages(cache, packages, say);

    say('[3/6] unpacking');
    const kernelDir = path.join(work, 'kernel');
    const rootfs = path.join(work, 'rootfs');
    mkdirSync(kernelDir);
    mkdirSync(rootfs);
    await run('dpkg-deb', ['-x', debs.get(kernelPackage)!, kernelDir]);
    for (const pkg of userland) await run('dpkg-deb', ['-x', debs.get(pkg)!, rootfs]);

    say('[4/6] assembling the root filesystem');
    await assembleRootfs(rootfs);
    const out = path.join(work, 'out');
    mkdirSync(out);
    const rawRoot = path.join(work, 'root.raw');
    await run('mke2fs', [
      '-q',
      '-F',
      '-t',
      'ext4',
      '-L',
      'nimbus-root',
      '-E',
      'root_owner=0:0',
      '-d',
      rootfs,
      rawRoot,
      `${ROOT_FS_MB}M`,
    ]);
    await fixOwnership(rawRoot, rootfs);
    await run('qemu-img', [
      'convert',
      '-q',
      '-f',
      'raw',
      '-O',
      'qcow2',
      rawRoot,
      path.join(out, 'root.qcow2'),
    ]);
    rmSync(rawRoot);

    say('[5/6] making the initramfs and taking the kernel');
    const modulesRoot = kernelModulesDir(kernelDir);
    const bootDir = path.join(kernelDir, 'boot');
    const vmlinuz = readdirSync(bootDir).find((f) => f.startsWith('vmlinuz-'));
    if (!vmlinuz) throw new ImageBuildError(`${kernelPackage} holds no kernel under /boot`);
    writeFileSync(path.join(out, 'vmlinuz'), readFileSync(path.join(bootDir, vmlinuz)));
    const busybox = readFileSync(path.join(rootfs, 'bin', 'busybox'));
    writeFileSync(path.join(out, 'initrd.img'), gzipSync(initramfs(busybox, modulesRoot), { level: 9 }));

    say('[6/6] writing the manifest');
    const manifest: ImageManifest = {
      name,
      version,
      kind: 'nimbus',
      kernel: kernel.version,
      kernel_cmdline: guest.KERNEL_CMDLINE,
      packages: described,
      built_at: new Date().toISOString(),
    };
    writeFileSync(path.join(out, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    for (const file of readdirSync(out)) chmodSync(path.join(out, file), 0o600);

    const target = path.join(imageDir, name, version);
    mkdirSync(path.join(imageDir, name), { recursive: true, mode: 0o700 });
    rmSync(target, { recursive: true, force: true });
    renameSync(out, target);
    chmodSync(target, 0o700);
    pointCurrent(imageDir, name, version);
    say(`Built image ${name} version ${version} in ${target}`);
    return { name, version, built: true, dir: target, packages: described };
  } finally {
    rmSync(work, { recursive: true, force: true });
    lock.release();
  }
}

function checkTools(): void {
  const missing = missingPrograms(
    Object.entries(BUILD_TOOLS).map(([program, debianPackage]) => ({ programs: [program], debianPackage })),
  );
  if (missing.length > 0) {
    throw new ImageBuildError(
      `The image build needs programs that are not installed: ${describeMissing(missing)}`,
    );
  }
}

/** The versioned kernel package the meta-package stands for (linux-image-6.1.0-…-cloud-amd64). */
async function kernelPackageName(aptCache: AptCache): Promise<string> {
  const text = await aptCache(['depends', KERNEL_PACKAGE]);
  const dependency = /Depends:\s+(linux-image-[^\s]+)/.exec(text)?.[1];
  if (!dependency) throw new ImageBuildError(`apt-cache does not know ${KERNEL_PACKAGE}`);
  return dependency;
}

/** The packages and everything they depend on (first alternative of each), sorted. */
async function dependencyClosure(aptCache: AptCache, roots: string[]): Promise<string[]> {
  const text = await aptCache([
    'depends',
    '--recurse',
    '--no-recommends',
    '--no-suggests',
    '--no-conflicts',
    '--no-breaks',
    '--no-replaces',
    '--no-enhances',
    ...roots,
  ]);
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    if (/^[a-z0-9][a-z0-9.+-]*$/.test(line.trim()) && !line.startsWith(' ')) names.add(line.trim());
  }
  return [...names].sort();
}

async function describePackages(aptCache: AptCache, names: string[]): Promise<AptPackage[]> {
  const text = await aptCache(['show', '--no-all-versions', ...names]);
  const found = new Map<string, AptPackage>();
  for (const stanza of text.split(/\n\n+/)) {
    const field = (key: string) => new RegExp(`^${key}: (.+)$`, 'm').exec(stanza)?.[1]?.trim();
    const pkg = field('Package');
    const version = field('Version');
    const sha256 = field('SHA256');
    const size = field('Size');
    if (pkg && version && sha256 && size && !found.has(pkg)) {
      found.set(pkg, { name: pkg, version, sha256, size: Number(size) });
    }
  }
  const missing = names.filter((n) => !found.has(n));
  if (missing.length > 0) {
    throw new ImageBuildError(
      `apt-cache has no candidate for ${missing.join(', ')}; run apt-get update (Debian 12 sources)`,
    );
  }
  return names.map((n) => found.get(n)!);
}

type AptCache = (args: string[]) => Promise<string>;

/**
 * apt-cache with its package cache kept in `cacheDir`. Debian's container images turn that cache off, so
 * each call would parse every package list again (1.5 s of CPU): the look-ups of a build with nothing to
 * do are most of its cost. apt rebuilds the file itself when the lists change.
 */
function aptCacheKeptIn(cacheDir: string): AptCache {
  mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
  const option = `Dir::Cache::pkgcache=${path.join(cacheDir, 'apt-pkgcache.bin')}`;
  return async (args) => {
    try {
      return await run('apt-cache', ['-o', option, ...args], { timeoutMs: 120_000 });
    } catch (error) {
      throw new ImageBuildError(`apt-cache ${args[0]} failed: ${(error as Error).message}`);
    }
  };
}

/** Each package's .deb in the cache; those missing (or not what apt-cache says) fetched in one apt-get. */
async function fetchPackages(
  cache: string,
  packages: AptPackage[],
  say: (line: string) => void,
): Promise<Map<string, string>> {
  const debs = new Map<string, string>();
  const missing: AptPackage[] = [];
  for (const pkg of packages) {
    const file = path.join(cache, `${pkg.name}_${pkg.version.replaceAll(':', '%3a')}.deb`);
    if (existsSync(file) && sha256Of(file) === pkg.sha256) debs.set(pkg.name, file);
    else missing.push(pkg);
  }
  say(`      ${debs.size} cached, ${missing.length} to download`);
  if (missing.length === 0) return debs;
  const tmp = path.join(cache, `.download-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  try {
    try {
      await run('apt-get', ['download', '-q', ...missing.map((p) => `${p.name}=${p.version}`)], {
        cwd: tmp,
        timeoutMs: 1_800_000,
      });
    } catch (error) {
      if (!(error instanceof ToolError)) throw error;
      throw new ImageBuildError(`apt-get download failed: ${error.stderr.trim()}`);
    }
    const got = readdirSync(tmp);
    for (const pkg of missing) {
      const name = got.find((f) => f.startsWith(`${pkg.name}_`) && f.endsWith('.deb'));
      if (!name) throw new ImageBuildError(`apt-get download left no .deb of ${pkg.name}`);
      if (sha256Of(path.join(tmp, name)) !== pkg.sha256) {
        throw new ImageBuildError(`${pkg.name} ${pkg.version}: the download does not match its SHA-256`);
      }
      const file = path.join(cache, `${pkg.name}_${pkg.version.replaceAll(':', '%3a')}.deb`);
      renameSync(path.join(tmp, name), file);
      debs.set(pkg.name, file);
      say(`      ${pkg.name} ${pkg.version}`);
    }
    return debs;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function sha256Of(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** Busybox's applets as links, the guest's configuration, and nothing the guest does not need. */
async function assembleRootfs(rootfs: string): Promise<void> {
  for (const dir of [
    'usr/share/doc',
    'usr/share/man',
    'usr/share/info',
    'usr/share/locale',
    'usr/share/lintian',
  ]) {
    rmSync(path.join(rootfs, dir), { recursive: true, force: true });
  }
  const busybox = path.join(rootfs, 'bin', 'busybox');
  if (!existsSync(busybox)) throw new ImageBuildError('busybox-static holds no /bin/busybox');
  const applets = (await run(busybox, ['--list-full'])).split('\n').filter(Boolean);
  for (const applet of applets) {
    const link = path.join(rootfs, applet);
    if (existsSync(link) || isLink(link)) continue; // the real program (resize2fs…) stays
    mkdirSync(path.dirname(link), { recursive: true });
    symlinkSync(path.relative(path.dirname(link), busybox), link);
  }
  const dirs: [string, number][] = [
    ['proc', 0o555],
    ['sys', 0o555],
    ['dev', 0o755],
    ['run', 0o755],
    ['tmp', 0o1777],
    ['mnt', 0o755],
    ['root', 0o700],
    ['home', 0o755],
    [`home/${guest.GUEST_USER}`, 0o755],
    ['var/lib/nimbus', 0o700],
    ['var/log', 0o755],
    ['etc/dropbear', 0o700],
    ['etc/init.d', 0o755],
    ['etc/acpi/PWRF', 0o755],
  ];
  for (const [dir, mode] of dirs) {
    mkdirSync(path.join(rootfs, dir), { recursive: true });
    chmodSync(path.join(rootfs, dir), mode);
  }
  const files: [string, string, number][] = [
    ['etc/inittab', guest.INITTAB, 0o644],
    ['etc/init.d/rcS', guest.RC_S, 0o755],
    ['etc/init.d/rcK', guest.RC_K, 0o755],
    ['etc/acpi/PWRF/00000080', guest.POWER_BUTTON, 0o755],
    ['etc/udhcpc.script', guest.UDHCPC_SCRIPT, 0o755],
    ['etc/passwd', guest.PASSWD, 0o644],
    ['etc/shadow', guest.SHADOW, 0o600],
    ['etc/group', guest.GROUP, 0o644],
    ['etc/shells', guest.SHELLS, 0o644],
    ['etc/mdev.conf', guest.MDEV_CONF, 0o644],
    ['etc/profile', guest.PROFILE, 0o644],
    ['etc/nsswitch.conf', guest.NSSWITCH, 0o644],
    ['etc/hosts', guest.HOSTS, 0o644],
    ['etc/hostname', 'nimbus-guest\n', 0o644],
  ];
  for (const [file, text, mode] of files) {
    writeFileSync(path.join(rootfs, file), text);
    chmodSync(path.join(rootfs, file), mode);
  }
  await checkLibraries(rootfs, ['usr/sbin/dropbear', 'sbin/resize2fs']);
}

function isLink(file: string): boolean {
  try {
    return lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Each program's shared libraries resolve inside the root filesystem (asked of its own loader). */
async function checkLibraries(rootfs: string, programs: string[]): Promise<void> {
  const loader = path.join(rootfs, 'lib64', 'ld-linux-x86-64.so.2');
  if (!existsSync(loader)) throw new ImageBuildError('libc6 left no /lib64/ld-linux-x86-64.so.2');
  const libraryPath = ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu'].map((d) => path.join(rootfs, d));
  for (const program of programs) {
    const listing = await run(loader, [
      '--library-path',
      libraryPath.join(':'),
      '--list',
      path.join(rootfs, program),
    ]);
    const missing = listing.split('\n').filter((line) => line.includes('not found'));
    if (missing.length > 0) {
      throw new ImageBuildError(`${program} needs libraries no package brought: ${missing.join('; ')}`);
    }
  }
}

/**
 * Every file root's, lambda's home lambda's: mke2fs copies the owners it finds, and an unprivileged build
 * finds its own; debugfs writes the owners into the filesystem directly.
 */
async function fixOwnership(rawRoot: string, rootfs: string): Promise<void> {
  const commands: string[] = [];
  const owner = (file: string, uid: number) => {
    commands.push(`sif "/${file}" uid ${uid}`, `sif "/${file}" gid ${uid}`);
  };
  if (process.getuid?.() !== 0) {
    const walk = (dir: string) => {
      for (const entry of readdirSync(path.join(rootfs, dir), { withFileTypes: true })) {
        const rel = dir ? `${dir}/${entry.name}` : entry.name;
        owner(rel, 0);
        if (entry.isDirectory()) walk(rel);
      }
    };
    walk('');
  }
  owner(`home/${guest.GUEST_USER}`, guest.GUEST_UID);
  const script = `${rawRoot}.debugfs`;
  writeFileSync(script, `${commands.join('\n')}\n`);
  try {
    await run('debugfs', ['-w', '-f', script, rawRoot]);
  } finally {
    rmSync(script, { force: true });
  }
}

function kernelModulesDir(kernelDir: string): string {
  const base = path.join(kernelDir, 'lib', 'modules');
  const version = readdirSync(base).find((d) => statSync(path.join(base, d)).isDirectory());
  if (!version) throw new ImageBuildError('the kernel package holds no /lib/modules');
  return path.join(base, version);
}

/** Every module file by module name (dashes and underscores are one), from the kernel's tree. */
function moduleFiles(modulesRoot: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ko')) files.set(entry.name.slice(0, -3).replaceAll('-', '_'), full);
    }
  };
  walk(path.join(modulesRoot, 'kernel'));
  return files;
}

/** The `depends=` of a module, read from its .modinfo strings. */
function moduleDependencies(file: string): string[] {
  const text = readFileSync(file).toString('latin1');
  const match = /\0depends=([^\0]*)\0/.exec(text);
  return match?.[1] ? match[1].split(',').filter(Boolean) : [];
}

/** The initramfs: static busybox, the modules in load order (dependencies first), and /init. */
function initramfs(busybox: Buffer, modulesRoot: string): Buffer {
  const files = moduleFiles(modulesRoot);
  const builtin = readFileSync(path.join(modulesRoot, 'modules.builtin'), 'utf8');
  const order: string[] = [];
  const visit = (name: string) => {
    const key = name.replaceAll('-', '_');
    if (order.includes(key)) return;
    const file = files.get(key);
    if (!file) {
      if (builtin.includes(`/${name}.ko`) || builtin.includes(`/${key}.ko`)) return;
      throw new ImageBuildError(`the kernel has no module ${name}`);
    }
    for (const dependency of moduleDependencies(file)) visit(dependency);
    order.push(key);
  };
  for (const module of guest.INITRAMFS_MODULES) visit(module);

  const entries: CpioEntry[] = [
    { kind: 'dir', path: 'bin' },
    { kind: 'file', path: 'bin/busybox', data: busybox, mode: 0o755 },
    ...['sh', 'mount', 'umount', 'insmod', 'sleep', 'mkdir', 'switch_root', 'poweroff'].map(
      (applet): CpioEntry => ({ kind: 'symlink', path: `bin/${applet}`, target: 'busybox' }),
    ),
    { kind: 'dir', path: 'dev' },
    { kind: 'char', path: 'dev/console', major: 5, minor: 1 },
    { kind: 'char', path: 'dev/null', major: 1, minor: 3, mode: 0o666 },
    { kind: 'dir', path: 'proc' },
    { kind: 'dir', path: 'sys' },
    { kind: 'dir', path: 'newroot' },
    { kind: 'dir', path: 'lib' },
    { kind: 'dir', path: 'lib/modules' },
    ...order.map(
      (module): CpioEntry => ({
        kind: 'file',
        path: `lib/modules/${module}.ko`,
        data: readFileSync(files.get(module)!),
      }),
    ),
    {
      kind: 'file',
      path: 'lib/modules/load-order',
      data: Buffer.from(order.map((m) => `${m}.ko\n`).join('')),
    },
    { kind: 'file', path: 'init', data: Buffer.from(guest.INITRAMFS_INIT), mode: 0o755 },
  ];
  return cpioArchive(entries);
}

/** `<name>/current` → `<version>`, replaced in one rename. */
function pointCurrent(imageDir: string, name: string, version: string): void {
  const current = path.join(imageDir, name, 'current');
  if (isLink(current) && readlinkSync(current) === version) return;
  const tmp = `${current}.${process.pid}`;
  rmSync(tmp, { force: true });
  symlinkSync(version, tmp);
  renameSync(tmp, current);
}

/** One build at a time per image dir; a lock left by a process that is gone is taken over. */
function takeLock(imageDir: string): { release(): void } {
  const file = path.join(imageDir, '.build.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
      return { release: () => rmSync(file, { force: true }) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(file, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
        throw new ImageBuildError(`Another image build (process ${holder}) is running in ${imageDir}`);
      }
      unlinkSync(file);
    }
  }
  throw new ImageBuildError(`Could not take the build lock ${file}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
