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

  it('refuses a TLS certificate without its key', () => {
    expect(() => loadConfig({ NIMBUS_TLS_CERT: '/etc/nimbus/cert.pem' })).toThrow(/set together/);
  });
});
