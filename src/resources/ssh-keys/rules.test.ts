import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  formatSshPublicKey,
  parseSshPublicKey,
  SSH_KEY_TYPES,
  SshKeyFormatError,
  sshFingerprint,
} from './rules.js';

/** Computed once with `ssh-keygen -t ed25519` and `ssh-keygen -lf` (OpenSSH 9.2). */
const FIXED = {
  line: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRb9olYCpSGsNwvNt3+sWeG618K2x4QXKOmIIiBqnY7 fixed@vector',
  fingerprint: 'SHA256:l6pQwjcATXhCFFmAUG0C8yStHDiD+suttIYG5Y4O70Y',
};

const HAVE_SSH_KEYGEN = (() => {
  try {
    execFileSync('ssh-keygen', ['-?'], { stdio: 'ignore' });
    return true;
  } catch (error) {
    // ssh-keygen exits 1 on -? but exists; ENOENT means it is not installed.
    return (error as { code?: string }).code !== 'ENOENT';
  }
})();

const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-sshkeys-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let fileCounter = 0;

/** `ssh-keygen -lf` on a public key line: the fingerprint it prints. */
function keygenFingerprint(line: string): string {
  const file = path.join(dir, `k${++fileCounter}.pub`);
  writeFileSync(file, `${line}\n`);
  return execFileSync('ssh-keygen', ['-lf', file], { encoding: 'utf8' }).split(' ')[1] as string;
}

/** A key made by ssh-keygen itself: its .pub line. */
function keygenKey(type: string, bits?: number): string {
  const file = path.join(dir, `g${++fileCounter}`);
  const args = ['-q', '-t', type, '-N', '', '-C', 'made by ssh-keygen', '-f', file];
  if (bits) args.push('-b', String(bits));
  execFileSync('ssh-keygen', args);
  return readFileSync(`${file}.pub`, 'utf8');
}

function nodeKey(kind: 'ed25519' | 'rsa' | 'ec', option?: number | string): KeyObject {
  if (kind === 'ed25519') return generateKeyPairSync('ed25519').publicKey;
  if (kind === 'rsa') return generateKeyPairSync('rsa', { modulusLength: option as number }).publicKey;
  return generateKeyPairSync('ec', { namedCurve: option as string }).publicKey;
}

// Wire-format builders, to make malformed blobs on purpose.
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const str = (s: string | Buffer) => {
  const body = typeof s === 'string' ? Buffer.from(s) : s;
  return Buffer.concat([u32(body.length), body]);
};
const blobOf = (line: string) => Buffer.from(line.split(' ')[1] as string, 'base64');
const line = (type: string, blob: Buffer) => `${type} ${blob.toString('base64')}`;

function refusal(input: string): SshKeyFormatError {
  try {
    parseSshPublicKey(input);
  } catch (error) {
    if (error instanceof SshKeyFormatError) return error;
    throw error;
  }
  throw new Error(`accepted: ${input.slice(0, 80)}`);
}

describe('parseSshPublicKey: accepted keys', () => {
  const cases = [
    { name: 'ed25519', key: () => nodeKey('ed25519'), type: 'ssh-ed25519', bits: 256 },
    { name: 'rsa 2048', key: () => nodeKey('rsa', 2048), type: 'ssh-rsa', bits: 2048 },
    { name: 'rsa 4096', key: () => nodeKey('rsa', 4096), type: 'ssh-rsa', bits: 4096 },
    { name: 'ecdsa P-256', key: () => nodeKey('ec', 'P-256'), type: 'ecdsa-sha2-nistp256', bits: 256 },
    { name: 'ecdsa P-384', key: () => nodeKey('ec', 'P-384'), type: 'ecdsa-sha2-nistp384', bits: 384 },
    { name: 'ecdsa P-521', key: () => nodeKey('ec', 'P-521'), type: 'ecdsa-sha2-nistp521', bits: 521 },
  ];

  it.each(cases)('$name from node:crypto: type, bits, comment and fingerprint', ({ key, type, bits }) => {
    const publicKey = key();
    const text = formatSshPublicKey(publicKey, 'me@laptop');
    const parsed = parseSshPublicKey(text);
    expect(parsed).toMatchObject({ type, bits, comment: 'me@laptop', normalized: text });
    expect(parsed.fingerprint).toBe(sshFingerprint(blobOf(text)));
    expect(parsed.fingerprint).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/);
    if (HAVE_SSH_KEYGEN) {
      expect(parsed.fingerprint).toBe(keygenFingerprint(text));
    }
    // ssh-keygen's own conversion of the same key gives the same line: the encoder is right. (OpenSSH 9.2
    // cannot convert Ed25519 from PKCS#8; for it, ssh-keygen reading the line above has to do.)
    if (HAVE_SSH_KEYGEN && type !== 'ssh-ed25519') {
      const pem = path.join(dir, `p${++fileCounter}.pem`);
      writeFileSync(pem, publicKey.export({ type: 'spki', format: 'pem' }));
      const converted = execFileSync('ssh-keygen', ['-i', '-m', 'PKCS8', '-f', pem], { encoding: 'utf8' });
      expect(converted.trim()).toBe(text.replace(' me@laptop', ''));
    }
  });

  it.skipIf(!HAVE_SSH_KEYGEN).each([
    ['ed25519', undefined, 'ssh-ed25519'],
    ['rsa', 2048, 'ssh-rsa'],
    ['rsa', 3072, 'ssh-rsa'],
    ['ecdsa', 256, 'ecdsa-sha2-nistp256'],
    ['ecdsa', 384, 'ecdsa-sha2-nistp384'],
    ['ecdsa', 521, 'ecdsa-sha2-nistp521'],
  ] as const)('%s %s made by ssh-keygen: same fingerprint as ssh-keygen -lf', (kind, bits, type) => {
    const text = keygenKey(kind, bits);
    const parsed = parseSshPublicKey(text);
    expect(parsed.type).toBe(type);
    expect(parsed.comment).toBe('made by ssh-keygen');
    expect(parsed.normalized).toBe(text.trim());
    expect(parsed.fingerprint).toBe(keygenFingerprint(text));
  });

  it('matches a fixed ssh-keygen vector', () => {
    expect(parseSshPublicKey(FIXED.line)).toMatchObject({
      type: 'ssh-ed25519',
      bits: 256,
      comment: 'fixed@vector',
      normalized: FIXED.line,
      fingerprint: FIXED.fingerprint,
    });
  });

  it('normalises whitespace: trimmed, single spaces, the comment kept word for word', () => {
    const [type, data] = FIXED.line.split(' ');
    const parsed = parseSshPublicKey(`  \t${type}\t ${data}   my   laptop key \n`);
    expect(parsed.normalized).toBe(`${type} ${data} my laptop key`);
    expect(parsed.comment).toBe('my laptop key');
    expect(parseSshPublicKey(`${type} ${data}`)).toMatchObject({
      comment: null,
      normalized: `${type} ${data}`,
    });
  });
});

describe('parseSshPublicKey: refused keys say why', () => {
  const ed25519 = formatSshPublicKey(nodeKey('ed25519'));
  const edBlob = blobOf(ed25519);

  it('RSA under 2048 bits, with the size it has', () => {
    const error = refusal(formatSshPublicKey(nodeKey('rsa', 1024)));
    expect(error.message).toBe('RSA keys must be at least 2048 bits; this one has 1024');
  });

  it('an unsupported type, listing the supported ones', () => {
    const error = refusal('ssh-dss AAAAB3NzaC1kc3MAAACBAP== me');
    expect(error.message).toContain('Unsupported key type "ssh-dss"');
    expect(error.allowedValues).toEqual(SSH_KEY_TYPES);
    // authorized_keys options before the type are not a key either.
    expect(refusal(`command="ls" ${ed25519}`).allowedValues).toEqual(SSH_KEY_TYPES);
    expect(refusal('sk-ssh-ed25519@openssh.com AAAA').allowedValues).toEqual(SSH_KEY_TYPES);
  });

  it('private keys, PEM public keys and several lines', () => {
    expect(
      refusal(
        '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----',
      ).message,
    ).toMatch(/private key/);
    expect(refusal('-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----').message).toMatch(
      /private key/,
    );
    const pem = nodeKey('ed25519').export({ type: 'spki', format: 'pem' }).toString();
    expect(refusal(pem).message).toMatch(/OpenSSH one-line format/);
    expect(refusal(`${ed25519}\n${ed25519}`).message).toMatch(/single line/);
    expect(refusal(`${ed25519} a\rb`).message).toMatch(/single line/);
    expect(refusal(`${ed25519} a\u0000b`).message).toMatch(/control characters/);
  });

  it('empty input, missing or non-base64 data', () => {
    expect(refusal('   ').message).toBe('The public key is empty');
    expect(refusal('ssh-ed25519').message).toMatch(/key data is missing/);
    expect(refusal('ssh-ed25519 not!base64').message).toMatch(/not valid base64/);
    expect(refusal('ssh-ed25519 AAAAC3NzaC1lZDI1NTE5').message).toMatch(/not valid base64|truncated/);
    expect(refusal('ssh-ed25519 AAF=').message).toMatch(/not valid base64/); // stray bits in the last character
  });

  it('a blob whose inner type differs from the line', () => {
    expect(refusal(line('ssh-rsa', edBlob)).message).toBe(
      'The key data is of type "ssh-ed25519" but the line says ssh-rsa',
    );
  });

  it('truncated blobs and trailing bytes', () => {
    for (const cut of [1, 16, 33, edBlob.length - 4]) {
      expect(refusal(line('ssh-ed25519', edBlob.subarray(0, edBlob.length - cut))).message).toMatch(
        /truncated/,
      );
    }
    expect(refusal(line('ssh-ed25519', Buffer.concat([edBlob, Buffer.of(0)]))).message).toBe(
      'The key data has 1 unexpected bytes after the key',
    );
    const rsa = blobOf(formatSshPublicKey(nodeKey('rsa', 2048)));
    expect(refusal(line('ssh-rsa', rsa.subarray(0, rsa.length - 10))).message).toMatch(/truncated/);
    expect(refusal(line('ssh-rsa', Buffer.concat([rsa, str('x')]))).message).toMatch(/unexpected bytes/);
  });

  it('malformed key material', () => {
    expect(
      refusal(line('ssh-ed25519', Buffer.concat([str('ssh-ed25519'), str(Buffer.alloc(31, 1))]))).message,
    ).toBe('Ed25519 keys are 32 bytes; this one has 31');
    const n = Buffer.concat([Buffer.of(0, 0xc5), Buffer.alloc(255, 0x37)]); // 2048 bits, odd
    const rsa = (e: Buffer, modulus: Buffer) =>
      line('ssh-rsa', Buffer.concat([str('ssh-rsa'), str(e), str(modulus)]));
    expect(parseSshPublicKey(rsa(Buffer.of(1, 0, 1), n)).bits).toBe(2048);
    expect(refusal(rsa(Buffer.of(1, 0, 1), n.subarray(1))).message).toMatch(
      /modulus is not a positive integer/,
    );
    expect(refusal(rsa(Buffer.of(0, 1, 0, 1), n)).message).toMatch(/exponent is not minimally encoded/);
    expect(
      refusal(rsa(Buffer.of(1, 0, 1), Buffer.concat([n.subarray(0, -1), Buffer.of(0x36)]))).message,
    ).toBe('The RSA modulus is even');
    expect(refusal(rsa(Buffer.of(1), n)).message).toMatch(/exponent must be odd and at least 3/);
    expect(refusal(rsa(Buffer.of(2), n)).message).toMatch(/exponent must be odd/);
    expect(refusal(rsa(Buffer.of(), n)).message).toMatch(/not a positive integer/);
    const huge = Buffer.concat([Buffer.of(0, 0xc5), Buffer.alloc(2048, 0x37)]);
    expect(refusal(rsa(Buffer.of(3), huge)).message).toBe(
      'RSA keys must be at most 16384 bits; this one has 16392',
    );
  });

  it('ECDSA: the curve must match the type and the point must be on it', () => {
    const p256 = blobOf(formatSshPublicKey(nodeKey('ec', 'P-256')));
    const point = p256.subarray(p256.length - 65);
    const ecdsa = (type: string, curve: string, q: Buffer) =>
      line(type, Buffer.concat([str(type), str(curve), str(q)]));
    expect(parseSshPublicKey(ecdsa('ecdsa-sha2-nistp256', 'nistp256', point)).bits).toBe(256);
    expect(refusal(ecdsa('ecdsa-sha2-nistp256', 'nistp384', point)).message).toBe(
      'The key is of type ecdsa-sha2-nistp256 but names the curve "nistp384"',
    );
    expect(refusal(ecdsa('ecdsa-sha2-nistp384', 'nistp384', point)).message).toMatch(
      /not an uncompressed P-384/,
    );
    const offCurve = Buffer.from(point);
    offCurve[64] = (offCurve[64] as number) ^ 1;
    expect(refusal(ecdsa('ecdsa-sha2-nistp256', 'nistp256', offCurve)).message).toBe(
      'The ECDSA P-256 point is not a valid public key',
    );
    const compressed = Buffer.concat([Buffer.of(0x02), point.subarray(1, 33)]);
    expect(refusal(ecdsa('ecdsa-sha2-nistp256', 'nistp256', compressed)).message).toMatch(/uncompressed/);
  });
});
