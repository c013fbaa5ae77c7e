import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backends, openBackends } from '../../composition.js';
import { loadConfig } from '../../platform/config.js';
import { AuthenticationFailed } from '../../platform/errors.js';

describe('ApiKeyService cache', () => {
  let dataDir: string;
  let backends: Backends;
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-keys-'));
    backends = await openBackends(loadConfig({ NIMBUS_DATA_DIR: dataDir, NIMBUS_AUTH_CACHE_SECONDS: '60' }));
  });
  afterAll(async () => {
    await backends.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('does not cache a key that was revoked while it was being read', async () => {
    const { accounts, apiKeys } = backends.services;
    const { account, apiKey } = await accounts.create({ email: `race-${Date.now()}@example.com` });
    // Both start now: the revocation commits between the two reads that verify the key.
    const [verified] = await Promise.all([
      apiKeys.authenticate(apiKey.key),
      apiKeys.delete(account.id, apiKey.id),
    ]);
    expect(verified.keyId).toBe(apiKey.id);
    await expect(apiKeys.authenticate(apiKey.key)).rejects.toBeInstanceOf(AuthenticationFailed);
  });

  it('serves a verified key from memory until it is revoked', async () => {
    const { accounts, apiKeys } = backends.services;
    const { account, apiKey } = await accounts.create({ email: `cached-${Date.now()}@example.com` });
    await apiKeys.authenticate(apiKey.key);
    await backends.store.db.deleteFrom('api_keys').where('id', '=', apiKey.id).execute();
    // Removed behind the service's back: still served from the cache, which is what makes it fast.
    expect((await apiKeys.authenticate(apiKey.key)).keyId).toBe(apiKey.id);
    await apiKeys.forgetAccount(account.id);
    await expect(apiKeys.authenticate(apiKey.key)).rejects.toBeInstanceOf(AuthenticationFailed);
  });
});

describe('ApiKeyService last-used flush', () => {
  it('finishes a flush already under way before the store closes', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-keys-'));
    try {
      const backends = await openBackends(loadConfig({ NIMBUS_DATA_DIR: dataDir }));
      const { accounts, apiKeys } = backends.services;
      const { apiKey } = await accounts.create({ email: `flush-${Date.now()}@example.com` });
      const { apiKey: other } = await accounts.create({ email: `flush-other-${Date.now()}@example.com` });
      await apiKeys.authenticate(apiKey.key);
      // A second key used a millisecond later: the flush writes two batches, the second after the first.
      const first = Date.now();
      while (Date.now() === first) await new Promise((resolve) => setImmediate(resolve));
      await apiKeys.authenticate(other.key);
      // As the periodic flush does when the server closes at that moment: started, not awaited.
      const underWay = apiKeys.flushLastUsed();
      await backends.close();
      await expect(underWay).resolves.toBeUndefined();

      const reopened = await openBackends(loadConfig({ NIMBUS_DATA_DIR: dataDir }));
      try {
        const rows = await reopened.store.db
          .selectFrom('api_keys')
          .select('last_used_at')
          .where('id', 'in', [apiKey.id, other.id])
          .execute();
        expect(rows.map((row) => row.last_used_at !== null)).toEqual([true, true]);
      } finally {
        await reopened.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
