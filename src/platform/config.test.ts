import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      httpsPort: 8443,
      httpPort: 8080,
      metricsPort: 9464,
      metadataPort: 8169,
      tls: null,
      trustProxy: false,
      databaseUrl: undefined,
      redisUrl: undefined,
      driver: 'simulator',
      simSpeedup: 1,
      publicDomain: 'nimbus.example.net',
      logLevel: 'info',
      v1EndOfLife: null,
      authCacheMs: 5000,
    });
    expect(config.dataDir).toMatch(/\/data$/);
  });

  it('converts and passes on every variable', () => {
    const config = loadConfig({
      NIMBUS_HTTPS_PORT: '9443',
      NIMBUS_HTTP_PORT: '0',
      NIMBUS_TRUST_PROXY: '10.0.0.0/8, 127.0.0.1',
      NIMBUS_DATABASE_URL: 'postgres://db/nimbus',
      NIMBUS_REDIS_URL: 'redis://cache:6379',
      NIMBUS_SIM_SPEEDUP: '250',
      NIMBUS_LOG_LEVEL: 'warn',
      NIMBUS_V1_END_OF_LIFE: '2027-12-31',
      NIMBUS_AUTH_CACHE_SECONDS: '0',
      NIMBUS_TLS_CERT: '/etc/nimbus/cert.pem',
      NIMBUS_TLS_KEY: '/etc/nimbus/key.pem',
    });
    expect(config).toMatchObject({
      httpsPort: 9443,
      httpPort: 0,
      trustProxy: '10.0.0.0/8, 127.0.0.1',
      databaseUrl: 'postgres://db/nimbus',
      redisUrl: 'redis://cache:6379',
      simSpeedup: 250,
      logLevel: 'warn',
      authCacheMs: 0,
      tls: { certFile: '/etc/nimbus/cert.pem', keyFile: '/etc/nimbus/key.pem' },
    });
    expect(config.v1EndOfLife?.toISOString()).toBe('2027-12-31T00:00:00.000Z');
    expect(loadConfig({ NIMBUS_TRUST_PROXY: 'true' }).trustProxy).toBe(true);
  });

  it.each([
    ['NIMBUS_HTTPS_PORT', '70000'],
    ['NIMBUS_HTTPS_PORT', 'https'],
    ['NIMBUS_DATABASE_URL', 'mysql://db/nimbus'],
    ['NIMBUS_REDIS_URL', 'localhost:6379'],
    ['NIMBUS_DRIVER', 'docker'],
    ['NIMBUS_LOG_LEVEL', 'verbose'],
    ['NIMBUS_SIM_SPEEDUP', '0'],
    ['NIMBUS_V1_END_OF_LIFE', 'next year'],
  ])('refuses %s=%s with a message naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  describe('the network of the qemu driver', () => {
    const qemu = { NIMBUS_DRIVER: 'qemu' };

    it('is the user-mode network unless NIMBUS_NETWORK says ovn', () => {
      expect(loadConfig({}).network).toEqual({ mode: 'user' });
      expect(loadConfig({ ...qemu, NIMBUS_NETWORK: 'ovn' }).network).toEqual({ mode: 'ovn', central: null });
    });

    it('takes an existing central with both databases, and the system OVS by default', () => {
      const central = { NIMBUS_OVN_NB_URL: 'tcp:10.0.0.5:6641', NIMBUS_OVN_SB_URL: 'tcp:10.0.0.5:6642' };
      expect(loadConfig({ ...qemu, NIMBUS_NETWORK: 'ovn', ...central }).network).toEqual({
        mode: 'ovn',
        central: {
          nbUrl: 'tcp:10.0.0.5:6641',
          sbUrl: 'tcp:10.0.0.5:6642',
          ovsDb: 'unix:/var/run/openvswitch/db.sock',
          bridge: 'br-int',
        },
      });
      const ovsDb = 'unix:/run/ovs/db.sock';
      expect(
        loadConfig({ ...qemu, NIMBUS_NETWORK: 'ovn', ...central, NIMBUS_OVS_DB: ovsDb }).network,
      ).toMatchObject({ central: { ovsDb } });
      expect(
        loadConfig({ ...qemu, NIMBUS_NETWORK: 'ovn', ...central, NIMBUS_OVN_BRIDGE: 'br-nimbus' }).network,
      ).toMatchObject({ central: { bridge: 'br-nimbus' } });
    });

    it('takes an integration bridge that is an interface name, with an existing central only', () => {
      const central = {
        ...qemu,
        NIMBUS_NETWORK: 'ovn',
        NIMBUS_OVN_NB_URL: 'tcp:10.0.0.5:6641',
        NIMBUS_OVN_SB_URL: 'tcp:10.0.0.5:6642',
      };
      // IFNAMSIZ: 15 characters and no slash or space.
      expect(loadConfig({ ...central, NIMBUS_OVN_BRIDGE: 'a234567890abcde' }).network).toMatchObject({
        central: { bridge: 'a234567890abcde' },
      });
      for (const bad of ['a234567890abcdef', 'br/int', 'br int']) {
        expect(() => loadConfig({ ...central, NIMBUS_OVN_BRIDGE: bad })).toThrow(/NIMBUS_OVN_BRIDGE/);
      }
      expect(() => loadConfig({ ...qemu, NIMBUS_NETWORK: 'ovn', NIMBUS_OVN_BRIDGE: 'br-int' })).toThrow(
        /NIMBUS_OVN_BRIDGE is for an existing OVN central/,
      );
      expect(() => loadConfig({ ...qemu, NIMBUS_OVN_BRIDGE: 'br-int' })).toThrow(
        /NIMBUS_OVN_BRIDGE need NIMBUS_NETWORK=ovn/,
      );
    });

    it('refuses what cannot work, saying why', () => {
      const refused = (env: Record<string, string>) => () => loadConfig(env);
      expect(refused({ NIMBUS_NETWORK: 'ovn' })).toThrow(/NIMBUS_NETWORK=ovn needs NIMBUS_DRIVER=qemu/);
      expect(refused({ ...qemu, NIMBUS_NETWORK: 'bridge' })).toThrow(ConfigError);
      expect(refused({ ...qemu, NIMBUS_NETWORK: 'ovn', NIMBUS_OVN_NB_URL: 'tcp:h:6641' })).toThrow(
        /set both or neither/,
      );
      expect(refused({ ...qemu, NIMBUS_OVN_NB_URL: 'tcp:h:6641', NIMBUS_OVN_SB_URL: 'tcp:h:6642' })).toThrow(
        /need NIMBUS_NETWORK=ovn/,
      );
      expect(refused({ ...qemu, NIMBUS_NETWORK: 'ovn', NIMBUS_OVS_DB: 'unix:/x' })).toThrow(
        /for an existing OVN central/,
      );
      expect(
        refused({
          ...qemu,
          NIMBUS_NETWORK: 'ovn',
          NIMBUS_OVN_NB_URL: 'ssl:h:6641',
          NIMBUS_OVN_SB_URL: 'tcp:h:6642',
        }),
      ).toThrow(/NIMBUS_OVN_NB_URL/);
    });

    it('takes a public uplink and its gateway with ovn only', () => {
      const ovn = { ...qemu, NIMBUS_NETWORK: 'ovn' };
      expect(loadConfig({ ...ovn, NIMBUS_PUBLIC_UPLINK: 'eth1' }).network).toEqual({
        mode: 'ovn',
        central: null,
        uplink: { interface: 'eth1', gateway: null },
      });
      expect(
        loadConfig({ ...ovn, NIMBUS_PUBLIC_UPLINK: 'eth1', NIMBUS_PUBLIC_GATEWAY: '203.0.113.254' }).network,
      ).toMatchObject({ uplink: { interface: 'eth1', gateway: '203.0.113.254' } });
      const refused = (env: Record<string, string>) => () => loadConfig(env);
      expect(refused({ ...qemu, NIMBUS_PUBLIC_UPLINK: 'eth1' })).toThrow(
        /NIMBUS_PUBLIC_UPLINK need NIMBUS_NETWORK=ovn/,
      );
      expect(refused({ ...ovn, NIMBUS_PUBLIC_GATEWAY: '203.0.113.1' })).toThrow(/set the uplink too/);
      expect(refused({ ...ovn, NIMBUS_PUBLIC_UPLINK: 'a-name-far-too-long' })).toThrow(
        /NIMBUS_PUBLIC_UPLINK/,
      );
      expect(
        refused({ ...ovn, NIMBUS_PUBLIC_UPLINK: 'eth1', NIMBUS_PUBLIC_GATEWAY: '203.0.113.256' }),
      ).toThrow(/NIMBUS_PUBLIC_GATEWAY/);
    });
  });

  it('refuses a TLS certificate without its key', () => {
    expect(() => loadConfig({ NIMBUS_TLS_CERT: '/etc/nimbus/cert.pem' })).toThrow(/set together/);
  });

  describe('the master key', () => {
    const key = randomBytes(32).toString('base64');

    it('comes from NIMBUS_SECRET_KEY, or from the file NIMBUS_SECRET_KEY_FILE names, which says where', () => {
      expect(loadConfig({ NIMBUS_SECRET_KEY: key })).toMatchObject({
        masterKey: Buffer.from(key, 'base64'),
        masterKeySource: 'NIMBUS_SECRET_KEY',
      });
      const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-config-'));
      try {
        const file = path.join(dir, 'key');
        writeFileSync(file, `${key}\n`);
        expect(loadConfig({ NIMBUS_SECRET_KEY_FILE: file })).toMatchObject({
          masterKey: Buffer.from(key, 'base64'),
          masterKeySource: `NIMBUS_SECRET_KEY_FILE (${file})`,
        });
        expect(() => loadConfig({ NIMBUS_SECRET_KEY_FILE: file, NIMBUS_SECRET_KEY: key })).toThrow(
          /not both/,
        );
        const short = randomBytes(16).toString('base64');
        writeFileSync(file, short);
        expect(() => loadConfig({ NIMBUS_SECRET_KEY_FILE: file })).toThrow(/base64 of 32 random bytes/);
        expect(() => loadConfig({ NIMBUS_SECRET_KEY_FILE: file })).not.toThrow(short);
        expect(() => loadConfig({ NIMBUS_SECRET_KEY_FILE: path.join(dir, 'missing') })).toThrow(/ENOENT/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      expect(loadConfig({})).toMatchObject({ masterKey: null, masterKeySource: null });
    });

    it('a malformed key is refused without being repeated', () => {
      const almost = `${key.slice(0, -1)}!`;
      expect(() => loadConfig({ NIMBUS_SECRET_KEY: almost })).toThrow(/NIMBUS_SECRET_KEY.*value not shown/);
      expect(() => loadConfig({ NIMBUS_SECRET_KEY: almost })).not.toThrow(almost.slice(0, 20));
    });
  });
});
