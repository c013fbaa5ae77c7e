/**
 * OpenSSH public keys: parsing the one-line `type base64 [comment]` form of a `.pub` file, checking the key
 * inside, and its fingerprint.
 *
 * The base64 part is the key blob in SSH wire format (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4): a
 * sequence of uint32-length-prefixed strings and mpints, the first naming the key type again. Every field
 * is read with its length checked against what is left, the inner type must equal the outer one, and no
 * byte may follow the last field. The key material is then handed to OpenSSL (as a JWK) so that, for
 * ECDSA, a point that is not on the curve is refused; RSA and Ed25519 get the checks OpenSSL does not do
 * on import (modulus size, odd modulus and exponent, 32-byte Ed25519 keys).
 *
 * The fingerprint is `SHA256:` + unpadded base64 of the SHA-256 of the blob: what `ssh-keygen -l` prints.
 */
import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';

export const SSH_KEY_TYPES = [
  'ssh-ed25519',
  'ssh-rsa',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
] as const;
export type SshKeyType = (typeof SSH_KEY_TYPES)[number];

export const MIN_RSA_BITS = 2048;
/** OpenSSH's own ceiling (SSH_RSA_MAXIMUM_MODULUS_SIZE): a larger key could not be used to log in. */
export const MAX_RSA_BITS = 16384;

/** SSH key names: as instance names, 1–64 of letters, digits, `.`, `_` and `-`. */
export const SSH_KEY_NAME_PATTERN = '^[A-Za-z0-9._-]+$';
export const MAX_SSH_KEY_NAME_LENGTH = 64;
/** Room for a 16384-bit RSA key (about 2.8 KB of base64) and a long comment. */
export const MAX_PUBLIC_KEY_LENGTH = 8192;

const CURVES = {
  'ecdsa-sha2-nistp256': { name: 'nistp256', jwk: 'P-256', coordinateBytes: 32 },
  'ecdsa-sha2-nistp384': { name: 'nistp384', jwk: 'P-384', coordinateBytes: 48 },
  'ecdsa-sha2-nistp521': { name: 'nistp521', jwk: 'P-521', coordinateBytes: 66 },
} as const;

export interface SshPublicKey {
  type: SshKeyType;
  /** Key size in bits: the modulus for RSA, the curve for ECDSA, 256 for Ed25519. */
  bits: number;
  comment: string | null;
  /** `type base64 [comment]`, single-spaced. */
  normalized: string;
  fingerprint: string;
}

/** Why a public key was refused; the message is meant for the user who pasted it. */
export class SshKeyFormatError extends Error {
  constructor(
    message: string,
    readonly allowedValues?: readonly string[],
  ) {
    super(message);
    this.name = 'SshKeyFormatError';
  }
}

function isSupportedType(type: string): type is SshKeyType {
  return (SSH_KEY_TYPES as readonly string[]).includes(type);
}

/** Reads the wire format; every read fails with a readable message instead of reading past the end. */
class WireReader {
  private offset = 0;
  constructor(private readonly bytes: Buffer) {}

  string(what: string): Buffer {
    if (this.bytes.length - this.offset < 4)
      throw new SshKeyFormatError(`The key data is truncated (${what})`);
    const length = this.bytes.readUInt32BE(this.offset);
    this.offset += 4;
    if (length > this.bytes.length - this.offset) {
      throw new SshKeyFormatError(`The key data is truncated (${what})`);
    }
    const value = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }

  /** A positive mpint (RFC 4251 §5), returned without its sign byte. */
  positiveMpint(what: string): Buffer {
    const raw = this.string(what);
    if (raw.length === 0 || (raw[0] as number) & 0x80) {
      throw new SshKeyFormatError(`The key's ${what} is not a positive integer`);
    }
    if (raw[0] === 0 && (raw.length === 1 || ((raw[1] as number) & 0x80) === 0)) {
      throw new SshKeyFormatError(`The key's ${what} is not minimally encoded`);
    }
    return raw[0] === 0 ? raw.subarray(1) : raw;
  }

  end(): void {
    if (this.offset !== this.bytes.length) {
      throw new SshKeyFormatError(
        `The key data has ${this.bytes.length - this.offset} unexpected bytes after the key`,
      );
    }
  }
}

function bitLength(unsigned: Buffer): number {
  const first = unsigned[0] as number;
  return (unsigned.length - 1) * 8 + (32 - Math.clz32(first));
}

const b64url = (bytes: Buffer) => bytes.toString('base64url');

function acceptedByOpenSsl(jwk: JsonWebKey, what: string): void {
  try {
    createPublicKey({ key: jwk, format: 'jwk' });
  } catch {
    throw new SshKeyFormatError(`The ${what} is not a valid public key`);
  }
}

/** Checks the key material after the type string; returns the key size in bits. */
function checkKeyMaterial(type: SshKeyType, reader: WireReader): number {
  if (type === 'ssh-ed25519') {
    const key = reader.string('Ed25519 key');
    reader.end();
    if (key.length !== 32) {
      throw new SshKeyFormatError(`Ed25519 keys are 32 bytes; this one has ${key.length}`);
    }
    acceptedByOpenSsl({ kty: 'OKP', crv: 'Ed25519', x: b64url(key) }, 'Ed25519 key');
    return 256;
  }
  if (type === 'ssh-rsa') {
    const e = reader.positiveMpint('RSA exponent');
    const n = reader.positiveMpint('RSA modulus');
    reader.end();
    const bits = bitLength(n);
    if (bits < MIN_RSA_BITS) {
      throw new SshKeyFormatError(`RSA keys must be at least ${MIN_RSA_BITS} bits; this one has ${bits}`);
    }
    if (bits > MAX_RSA_BITS) {
      throw new SshKeyFormatError(`RSA keys must be at most ${MAX_RSA_BITS} bits; this one has ${bits}`);
    }
    // A modulus is a product of two odd primes; the public exponent is odd and at least 3.
    if (((n[n.length - 1] as number) & 1) === 0) throw new SshKeyFormatError('The RSA modulus is even');
    if (((e[e.length - 1] as number) & 1) === 0 || (e.length === 1 && (e[0] as number) < 3)) {
      throw new SshKeyFormatError('The RSA public exponent must be odd and at least 3');
    }
    if (e.length > n.length)
      throw new SshKeyFormatError('The RSA public exponent is larger than the modulus');
    acceptedByOpenSsl({ kty: 'RSA', n: b64url(n), e: b64url(e) }, 'RSA key');
    return bits;
  }
  const curve = CURVES[type];
  const curveName = reader.string('curve name').toString('latin1');
  const point = reader.string('ECDSA point');
  reader.end();
  if (curveName !== curve.name) {
    throw new SshKeyFormatError(
      `The key is of type ${type} but names the curve ${JSON.stringify(curveName)}`,
    );
  }
  // Only the uncompressed form (0x04 || X || Y) is used by OpenSSH.
  if (point.length !== 1 + 2 * curve.coordinateBytes || point[0] !== 0x04) {
    throw new SshKeyFormatError(`The ECDSA point is not an uncompressed ${curve.jwk} point`);
  }
  const x = point.subarray(1, 1 + curve.coordinateBytes);
  const y = point.subarray(1 + curve.coordinateBytes);
  acceptedByOpenSsl({ kty: 'EC', crv: curve.jwk, x: b64url(x), y: b64url(y) }, `ECDSA ${curve.jwk} point`);
  return type === 'ecdsa-sha2-nistp521' ? 521 : curve.coordinateBytes * 8;
}

/** `SHA256:…` over the decoded key blob, exactly as `ssh-keygen -lf` prints it. */
export function sshFingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
// Control characters other than the separators (tab, space) and line breaks (checked first).
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;

/** Parses and checks one OpenSSH public key line; throws SshKeyFormatError saying what is wrong. */
export function parseSshPublicKey(input: string): SshPublicKey {
  const text = input.trim();
  if (text.length === 0) throw new SshKeyFormatError('The public key is empty');
  if (/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/.test(text)) {
    throw new SshKeyFormatError(
      'This is a private key; never share it. Upload the public key instead (the .pub file)',
    );
  }
  if (text.startsWith('-----BEGIN') || text.startsWith('---- BEGIN')) {
    throw new SshKeyFormatError(
      'PEM and RFC 4716 keys are not accepted; use the OpenSSH one-line format of a .pub file ' +
        '(ssh-keygen -i -f key converts one)',
    );
  }
  if (/[\r\n]/.test(text)) {
    throw new SshKeyFormatError(
      'The public key must be a single line: type, base64 key data, optional comment',
    );
  }
  if (CONTROL.test(text)) throw new SshKeyFormatError('The public key contains control characters');

  const [type = '', data, ...commentWords] = text.split(/[ \t]+/);
  if (!isSupportedType(type)) {
    throw new SshKeyFormatError(
      `Unsupported key type ${JSON.stringify(type.slice(0, 64))}; supported: ${SSH_KEY_TYPES.join(', ')}`,
      SSH_KEY_TYPES,
    );
  }
  if (data === undefined) throw new SshKeyFormatError(`The key data is missing after ${type}`);
  // Buffer.from skips characters that are not base64, so the text is checked first and the round trip
  // catches wrong padding or stray bits in the last character.
  const blob = Buffer.from(data, 'base64');
  if (!BASE64.test(data) || data.length % 4 !== 0 || blob.toString('base64') !== data) {
    throw new SshKeyFormatError('The key data is not valid base64');
  }

  const reader = new WireReader(blob);
  const innerType = reader.string('key type').toString('latin1');
  if (innerType !== type) {
    throw new SshKeyFormatError(
      `The key data is of type ${JSON.stringify(innerType.slice(0, 64))} but the line says ${type}`,
    );
  }
  const bits = checkKeyMaterial(type, reader);
  const comment = commentWords.length > 0 ? commentWords.join(' ') : null;
  return {
    type,
    bits,
    comment,
    normalized: comment === null ? `${type} ${data}` : `${type} ${data} ${comment}`,
    fingerprint: sshFingerprint(blob),
  };
}

function wireString(bytes: Buffer | string): Buffer {
  const body = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes;
  const length = Buffer.alloc(4);
  length.writeUInt32BE(body.length);
  return Buffer.concat([length, body]);
}

function wireMpint(unsigned: Buffer): Buffer {
  let start = 0;
  while (start < unsigned.length - 1 && unsigned[start] === 0) start++;
  const trimmed = unsigned.subarray(start);
  return wireString((trimmed[0] as number) & 0x80 ? Buffer.concat([Buffer.of(0), trimmed]) : trimmed);
}

/** The OpenSSH one-line form of a node:crypto public key (the inverse of parseSshPublicKey). */
export function formatSshPublicKey(key: KeyObject, comment?: string): string {
  const jwk = key.export({ format: 'jwk' });
  const bytes = (value: string | undefined) => Buffer.from(value ?? '', 'base64url');
  let type: SshKeyType;
  let blob: Buffer;
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') {
    type = 'ssh-ed25519';
    blob = Buffer.concat([wireString(type), wireString(bytes(jwk.x))]);
  } else if (jwk.kty === 'RSA') {
    type = 'ssh-rsa';
    blob = Buffer.concat([wireString(type), wireMpint(bytes(jwk.e)), wireMpint(bytes(jwk.n))]);
  } else {
    const entry = Object.entries(CURVES).find(([, curve]) => curve.jwk === jwk.crv);
    if (jwk.kty !== 'EC' || !entry) throw new Error(`No OpenSSH form for a ${jwk.kty} ${jwk.crv ?? ''} key`);
    type = entry[0] as SshKeyType;
    const point = Buffer.concat([Buffer.of(0x04), bytes(jwk.x), bytes(jwk.y)]);
    blob = Buffer.concat([wireString(type), wireString(entry[1].name), wireString(point)]);
  }
  const line = `${type} ${blob.toString('base64')}`;
  return comment ? `${line} ${comment}` : line;
}
