/** The file clock of tests running the server as a child (src/platform/test-clock.ts), and its guard in config. */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';
import { FileClock } from './test-clock.js';

describe('FileClock', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-test-clock-'));
  const file = path.join(dir, 'now');
  const setTime = (text: string) => {
    writeFileSync(`${file}.next`, text);
    renameSync(`${file}.next`, file);
  };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the time the file holds at every call', () => {
    setTime('2026-03-01T00:00:00Z\n');
    const clock = new FileClock(file);
    expect(clock.now().toISOString()).toBe('2026-03-01T00:00:00.000Z');
    setTime('2026-03-01T10:00:00.005Z');
    expect(clock.nowMs()).toBe(Date.parse('2026-03-01T10:00:00.005Z'));
  });

  it('refuses a file that holds no time, from the start', () => {
    setTime('soon');
    expect(() => new FileClock(file)).toThrow(/not an ISO time/);
    expect(() => new FileClock(path.join(dir, 'missing'))).toThrow(/ENOENT/);
  });

  it('is a setting for tests only', () => {
    const env = { NIMBUS_TEST_CLOCK_FILE: file };
    expect(() => loadConfig({ ...env, NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/tests only/);
    expect(loadConfig({ ...env, NODE_ENV: 'test' }).testClockFile).toBe(file);
    expect(loadConfig({ NODE_ENV: 'test' }).testClockFile).toBeNull();
  });
});
