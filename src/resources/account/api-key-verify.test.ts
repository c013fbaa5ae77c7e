/**
 * Verifying a presented key in two steps (memory, then the store), as the request guard does: a key that
 * cannot be ours is refused without hashing, and a key is hashed once per request even when the store
 * has to be asked (the hash travels in the UnverifiedKey).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';

const hashes = vi.hoisted(() => ({ count: 0 }));
vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  return {
    ...actual,
    hash: (...args: Parameters<typeof actual.hash>) => {
      hashes.count += 1;
      return actual.hash(...args);
    },
  };
});

const { openBackends } = await import('../../composition.js');
const { loadConfig } = await import('../../platform/config.js');
const { hashKey } = await import('./api-key-service.js');
const { UnverifiedKey } = await import('../../platform/authenticator.js');
const { AuthenticationFailed } = await import('../../platform/errors.js');

describe('ApiKeyService.verifyFromMemory / verifyFromStore', () => {
  let dataDir: string;
  let backends: Awaited<ReturnType<typeof openBackends>>;
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-verify-'));
    backends = await openBackends(loadConfig({ NIMBUS_DATA_DIR: dataDir, NIMBUS_AUTH_CACHE_SECONDS: '60' }));
  });
  afterAll(async () => {
    await backends.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  beforeEach(() => {
    hashes.count = 0;
  });

  it('refuses what cannot be a key without hashing it', () => {
    const { apiKeys } = backends.services;
    for (const presented of ['not-a-key', `nmb_${'x'.repeat(500)}`, '']) {
      expect(apiKeys.verifyFromMemory(presented)).toBeInstanceOf(AuthenticationFailed);
    }
    expect(hashes.count).toBe(0);
  });

  it('hashes a key once on a cache miss, then once per request from the cache', async () => {
    const { accounts, apiKeys } = backends.services;
    const { apiKey } = await accounts.create({ email: `verify-${Date.now()}@example.com` });
    const keyHash = hashKey(apiKey.key);
    hashes.count = 0;

    const unverified = apiKeys.verifyFromMemory(apiKey.key);
    expect(unverified).toEqual(new UnverifiedKey(keyHash));
    expect(hashes.count).toBe(1);
    if (!(unverified instanceof UnverifiedKey)) return;
    const principal = await apiKeys.verifyFromStore(unverified);
    expect(principal.keyId).toBe(apiKey.id);
    expect(hashes.count).toBe(1);

    expect(apiKeys.verifyFromMemory(apiKey.key)).toEqual(principal);
    expect(hashes.count).toBe(2);
  });

  it('an unknown key of the right form is refused by the store', async () => {
    const { apiKeys } = backends.services;
    const unverified = apiKeys.verifyFromMemory(`nmb_${'0'.repeat(43)}`);
    expect(unverified).toBeInstanceOf(UnverifiedKey);
    if (!(unverified instanceof UnverifiedKey)) return;
    await expect(apiKeys.verifyFromStore(unverified)).rejects.toBeInstanceOf(AuthenticationFailed);
  });
});
