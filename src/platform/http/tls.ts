/**
 * TLS material: the operator's PEM files when configured, otherwise a self-signed certificate made on
 * first start and kept in the data dir (so clients can pin it across restarts).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { SecureContextOptions, TlsOptions } from 'node:tls';
import { generate } from 'selfsigned';

/**
 * TLS 1.2 with forward-secret AEAD suites only, and TLS 1.3 (whose suites all are): no CBC (Lucky13,
 * padding oracles), no CCM8 (short tags), no static RSA key exchange, nothing older than 1.2. This is
 * Mozilla's "intermediate" profile without DHE (which needs parameters of our own and adds nothing
 * over ECDHE for today's clients). Both RSA and ECDSA certificates are covered.
 */
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** The options every TLS listener of Nimbus is created with, besides its key and certificate. */
export const TLS_POLICY: Pick<
  TlsOptions & SecureContextOptions,
  'minVersion' | 'ciphers' | 'honorCipherOrder'
> = {
  minVersion: 'TLSv1.2',
  ciphers: TLS_CIPHERS,
  // Clients pick the suite they do best; every suite offered is one we consider sound.
  honorCipherOrder: false,
};

export interface TlsMaterial {
  key: Buffer;
  cert: Buffer;
  certFile: string;
  generated: boolean;
}

export async function loadOrCreateTls(options: {
  dataDir: string;
  files: { certFile: string; keyFile: string } | null;
  host: string;
}): Promise<TlsMaterial> {
  if (options.files) {
    return {
      key: readFileSync(options.files.keyFile),
      cert: readFileSync(options.files.certFile),
      certFile: options.files.certFile,
      generated: false,
    };
  }
  const dir = path.join(options.dataDir, 'tls');
  const certFile = path.join(dir, 'cert.pem');
  const keyFile = path.join(dir, 'key.pem');
  if (existsSync(certFile) && existsSync(keyFile)) {
    return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile, generated: false };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const altNames: { type: 2 | 7; value?: string; ip?: string }[] = [
    { type: 2, value: 'localhost' },
    { type: 7, ip: '127.0.0.1' },
    { type: 7, ip: '::1' },
  ];
  if (
    options.host !== '0.0.0.0' &&
    options.host !== '::' &&
    !['127.0.0.1', '::1', 'localhost'].includes(options.host)
  ) {
    altNames.push(
      /^[\d.]+$|:/.test(options.host) ? { type: 7, ip: options.host } : { type: 2, value: options.host },
    );
  }
  const now = new Date();
  const pems = await generate([{ name: 'commonName', value: 'nimbus.local' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate: now,
    notAfterDate: new Date(now.getTime() + 825 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  writeFileSync(keyFile, pems.private, { mode: 0o600 });
  writeFileSync(certFile, pems.cert, { mode: 0o644 });
  return { key: Buffer.from(pems.private), cert: Buffer.from(pems.cert), certFile, generated: true };
}
