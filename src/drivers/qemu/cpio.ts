/**
 * A writer of cpio archives in the "newc" format, the one the Linux kernel unpacks as an initramfs.
 * Entries are written in the order given (directories before what they hold), all owned by root, with
 * fixed times, so the same input gives the same bytes.
 */

export type CpioEntry =
  | { kind: 'dir'; path: string; mode?: number }
  | { kind: 'file'; path: string; data: Buffer; mode?: number }
  | { kind: 'symlink'; path: string; target: string }
  | { kind: 'char'; path: string; major: number; minor: number; mode?: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

const hex8 = (n: number) => n.toString(16).padStart(8, '0');
const pad4 = (length: number) => Buffer.alloc((4 - (length % 4)) % 4);

function header(
  ino: number,
  mode: number,
  size: number,
  name: string,
  dev: { major: number; minor: number } = { major: 0, minor: 0 },
) {
  const nameBytes = Buffer.from(`${name}\0`, 'utf8');
  const fields = [
    '070701',
    hex8(ino),
    hex8(mode),
    hex8(0), // uid
    hex8(0), // gid
    hex8(1), // nlink
    hex8(0), // mtime
    hex8(size),
    hex8(0), // dev major
    hex8(0), // dev minor
    hex8(dev.major),
    hex8(dev.minor),
    hex8(nameBytes.length),
    hex8(0), // check
  ];
  const head = Buffer.concat([Buffer.from(fields.join(''), 'ascii'), nameBytes]);
  return Buffer.concat([head, pad4(head.length)]);
}

/** The archive's bytes (uncompressed). Paths are relative, without a leading slash. */
export function cpioArchive(entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  let ino = 1;
  for (const entry of entries) {
    const path = entry.path.replace(/^\/+/, '');
    switch (entry.kind) {
      case 'dir':
        parts.push(header(ino++, S_IFDIR | (entry.mode ?? 0o755), 0, path));
        break;
      case 'file':
        parts.push(header(ino++, S_IFREG | (entry.mode ?? 0o644), entry.data.length, path));
        parts.push(entry.data, pad4(entry.data.length));
        break;
      case 'symlink': {
        const target = Buffer.from(entry.target, 'utf8');
        parts.push(header(ino++, S_IFLNK | 0o777, target.length, path), target, pad4(target.length));
        break;
      }
      case 'char':
        parts.push(
          header(ino++, S_IFCHR | (entry.mode ?? 0o600), 0, path, { major: entry.major, minor: entry.minor }),
        );
        break;
    }
  }
  parts.push(header(0, 0, 0, 'TRAILER!!!'));
  const archive = Buffer.concat(parts);
  // The kernel reads the archive in 512-byte blocks' worth; padding keeps tools that check it quiet.
  return Buffer.concat([archive, Buffer.alloc((512 - (archive.length % 512)) % 512)]);
}
