/**
 * retainTickObjectShape, checked where it matters: a fresh process runs full collections between bursts
 * of nextTick calls, as a loaded server does, and V8 prints (%DebugPrint) the state of nextTick's
 * feedback for the keys of its tick literal.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

function tickLiteralFeedback(retain: boolean): string[] {
  const module = JSON.stringify(path.resolve('dist/tick-shape.js'));
  const script = `
    ${retain ? `import { retainTickObjectShape } from ${module}; if (!retainTickObjectShape()) throw new Error('no tick object');` : ''}
    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 5000; i++) process.nextTick(() => {});
      await sleep(5);
      gc();
    }
    process.nextTick(() => {});
    %DebugPrint(process.nextTick);
  `;
  const child = spawnSync(
    process.execPath,
    ['--allow-natives-syntax', '--expose-gc', '--input-type=module', '-e', script],
    { encoding: 'utf8' },
  );
  expect(child.status, child.stderr).toBe(0);
  return child.stdout.match(/DefineKeyedOwnPropertyInLiteral [A-Z_]+/g) ?? [];
}

describe('retainTickObjectShape', () => {
  // The reason the module exists. Should a Node upgrade make this fail, V8 has fixed it and the module can go.
  it('is needed: without it, full collections turn the tick literal megamorphic', () => {
    expect(tickLiteralFeedback(false)).toContain('DefineKeyedOwnPropertyInLiteral MEGAMORPHIC');
  });

  it('keeps every key of the tick literal monomorphic through the same collections', () => {
    const states = tickLiteralFeedback(true);
    expect(states.length).toBeGreaterThanOrEqual(2);
    expect(new Set(states)).toEqual(new Set(['DefineKeyedOwnPropertyInLiteral MONOMORPHIC']));
  });
});
