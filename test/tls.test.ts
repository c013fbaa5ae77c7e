/**
 * The TLS policy of the API listener (src/platform/http/tls.ts): TLS 1.2 with forward-secret AEAD suites and
 * TLS 1.3, nothing else. Each refusal is a real handshake a client offering only that suite attempts.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverForSuite } from './helpers/server.js';

interface Handshake {
  ok: boolean;
  protocol: string | null;
  cipher: string | null;
  error: string | null;
}

function handshake(url: string, ca: Buffer, options: tls.ConnectionOptions): Promise<Handshake> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: hostname,
      port: Number(port),
      ca,
      servername: 'localhost',
      ...options,
    });
    socket.once('secureConnect', () => {
      resolve({ ok: true, protocol: socket.getProtocol(), cipher: socket.getCipher().name, error: null });
      socket.end();
    });
    socket.once('error', (error: NodeJS.ErrnoException) =>
      resolve({ ok: false, protocol: null, cipher: null, error: error.code ?? error.message }),
    );
  });
}

describe('TLS policy', () => {
  const server = serverForSuite();
  const ca = () => readFileSync(server.running.certFile);

  // The control: a TLS server with the same certificate that accepts anything. Each refused offer must
  // succeed there, so a refusal is the API server's policy and not this client's inability to offer it.
  let permissive: tls.Server;
  let permissiveUrl = '';
  beforeAll(async () => {
    const dir = path.join(server.config.dataDir, 'tls');
    permissive = tls.createServer({
      key: readFileSync(path.join(dir, 'key.pem')),
      cert: readFileSync(path.join(dir, 'cert.pem')),
      ciphers: 'TLS_AES_128_GCM_SHA256:TLS_AES_128_CCM_SHA256:TLS_AES_128_CCM_8_SHA256:ALL:@SECLEVEL=0',
      minVersion: 'TLSv1',
    });
    permissive.on('secureConnection', (socket) => socket.end());
    await new Promise<void>((resolve) => permissive.listen(0, '127.0.0.1', resolve));
    permissiveUrl = `https://127.0.0.1:${(permissive.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => permissive.close(() => resolve())));

  async function expectRefused(options: tls.ConnectionOptions) {
    const control = await handshake(permissiveUrl, ca(), options);
    expect(control, 'the client can offer this').toMatchObject({ ok: true });
    const result = await handshake(server.url, ca(), options);
    expect(result.ok, `${result.protocol} ${result.cipher} was negotiated`).toBe(false);
  }

  it.each([
    ['ECDHE-ECDSA-AES128-SHA256', 'CBC'],
    ['ECDHE-ECDSA-AES256-SHA384', 'CBC'],
    ['ECDHE-ECDSA-AES128-SHA', 'CBC with SHA-1'],
    ['ECDHE-ECDSA-AES128-CCM8', 'CCM8'],
    ['ECDHE-ECDSA-AES256-CCM8', 'CCM8'],
    ['ECDHE-ECDSA-AES128-CCM', 'CCM'],
  ])('refuses a TLS 1.2 client offering only %s (%s)', async (cipher) => {
    await expectRefused({ maxVersion: 'TLSv1.2', ciphers: cipher });
  });

  it('refuses TLS 1.1 and 1.0', async () => {
    for (const version of ['TLSv1.1', 'TLSv1'] as const) {
      // The client's own default floor would refuse first; lower it so the server is the one saying no.
      await expectRefused({ minVersion: version, maxVersion: version, ciphers: 'DEFAULT@SECLEVEL=0' });
    }
  });

  it.each([
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
  ])('accepts TLS 1.2 with %s', async (cipher) => {
    const result = await handshake(server.url, ca(), { maxVersion: 'TLSv1.2', ciphers: cipher });
    expect(result).toMatchObject({ ok: true, protocol: 'TLSv1.2', cipher });
  });

  it.each(['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'])(
    'accepts TLS 1.3 with %s',
    async (suite) => {
      const result = await handshake(server.url, ca(), { minVersion: 'TLSv1.3', ciphers: suite });
      expect(result).toMatchObject({ ok: true, protocol: 'TLSv1.3', cipher: suite });
    },
  );

  it('refuses TLS 1.3 CCM suites', async () => {
    for (const suite of ['TLS_AES_128_CCM_SHA256', 'TLS_AES_128_CCM_8_SHA256']) {
      await expectRefused({ minVersion: 'TLSv1.3', ciphers: suite });
    }
  });
});
