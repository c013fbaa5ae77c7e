import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { TurnBatchedDestination } from './log-destination.js';

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

describe('TurnBatchedDestination', () => {
  it('writes every line, in order, once flushed', async () => {
    const file = logFile();
    const destination = new TurnBatchedDestination(
      pino.destination({ dest: file, sync: false, minLength: 4096 }),
    );
    for (let i = 0; i < 1000; i++) destination.write(`line ${i}\n`);
    await new Promise<void>((resolve, reject) =>
      destination.flush((error) => (error ? reject(error) : resolve())),
    );
    expect(lines(file)).toEqual(Array.from({ length: 1000 }, (_, i) => `line ${i}`));
  });

  it('hands lines on by itself at the end of the event-loop turn', async () => {
    const file = logFile();
    // minLength 0: whatever is handed on is written at once, so only the hand-over is being waited for.
    const destination = new TurnBatchedDestination(pino.destination({ dest: file, sync: true }));
    destination.write('first\n');
    destination.write('second\n');
    expect(readFileSync(file, 'utf8')).toBe('');
    await new Promise((resolve) => setImmediate(resolve));
    await new Promise((resolve) => setImmediate(resolve));
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
        import { TurnBatchedDestination } from ${JSON.stringify(path.resolve('dist/log-destination.js'))};
        const logger = pino({}, new TurnBatchedDestination(pino.destination({ dest: openSync(${JSON.stringify(file)}, 'a'), sync: false, minLength: 4096 })));
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
