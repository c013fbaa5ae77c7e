import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferedLogDestination, WRITE_AT_ONCE } from './log-destination.js';

const dirs: string[] = [];
function logFile(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nimbus-log-'));
  dirs.push(dir);
  return path.join(dir, 'nimbus.log');
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const lines = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean);

describe('BufferedLogDestination', () => {
  it('writes every line, in order, once flushed', async () => {
    const file = logFile();
    const destination = new BufferedLogDestination(
      pino.destination({ dest: file, sync: false, minLength: WRITE_AT_ONCE }),
    );
    for (let i = 0; i < 10_000; i++) destination.write(`line ${i}\n`);
    await new Promise<void>((resolve, reject) =>
      destination.flush((error) => (error ? reject(error) : resolve())),
    );
    expect(lines(file)).toEqual(Array.from({ length: 10_000 }, (_, i) => `line ${i}`));
  });

  // A synchronous target writes whatever it is handed at once, so the file shows each hand-over.
  it('passes lines on once a chunk has gathered', () => {
    const file = logFile();
    const destination = new BufferedLogDestination(pino.destination({ dest: file, sync: true }), {
      chunkChars: 20,
      maxDelayMs: 60_000,
    });
    destination.write('0123456789\n');
    expect(readFileSync(file, 'utf8')).toBe('');
    destination.write('abcdefghij\n');
    expect(lines(file)).toEqual(['0123456789', 'abcdefghij']);
  });

  it("passes a quiet server's lines on within the delay", async () => {
    const file = logFile();
    const destination = new BufferedLogDestination(pino.destination({ dest: file, sync: true }), {
      chunkChars: 64 * 1024,
      maxDelayMs: 30,
    });
    destination.write('first\n');
    destination.write('second\n');
    expect(readFileSync(file, 'utf8')).toBe('');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(lines(file)).toEqual(['first', 'second']);
  });

  // A child process, because what is checked is what survives the process.
  const exits = {
    'process.exit()': 'process.exit(0);',
    'an uncaught exception': "throw new Error('boom');",
  };
  for (const [how, ending] of Object.entries(exits)) {
    it(`loses nothing logged just before ${how}`, () => {
      const file = logFile();
      const script = `
        import { openSync } from 'node:fs';
        import pino from 'pino';
        import { BufferedLogDestination } from ${JSON.stringify(path.resolve('dist/platform/log-destination.js'))};
        const logger = pino({}, new BufferedLogDestination(pino.destination({ dest: openSync(${JSON.stringify(file)}, 'a'), sync: false, minLength: 1 })));
        for (let i = 0; i < 50; i++) logger.info({ i }, 'before exit');
        ${ending}
      `;
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
      expect(child.status, child.stderr).toBe(how === 'process.exit()' ? 0 : 1);
      const logged = lines(file).map((line) => JSON.parse(line).i);
      expect(logged).toEqual(Array.from({ length: 50 }, (_, i) => i));
    });
  }
});
