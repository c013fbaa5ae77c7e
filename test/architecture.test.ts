/**
 * The shape of the source tree (docs/architecture.md): the platform (src/platform) never imports a
 * resource (src/resources/<kind>) or the composition root, the server (main.ts) imports only the
 * platform and the composition root, and no two resources import each other in a circle. Read from the
 * import statements themselves, so a new arrow fails here before it lands.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../src/resources.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SRC = path.join(ROOT, 'src');

/** Every non-test source file, as a path relative to src/ with forward slashes. */
function sourceFiles(): string[] {
  return readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .map((file) => file.split(path.sep).join('/'))
    .filter((file) => /\.tsx?$/.test(file) && !file.endsWith('.test.ts') && !file.endsWith('.d.ts'));
}

/** The files a source file imports, relative to src/ (only the project's own, by relative path). */
function importsOf(file: string): string[] {
  const text = readFileSync(path.join(SRC, file), 'utf8');
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.map((entry) => entry.fileName)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) =>
      path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'),
    );
}

/** The area a file belongs to: `platform`, `resources/<kind>`, `drivers`, `cli`, or the file itself at the root. */
function areaOf(file: string): string {
  const match = /^(platform|resources\/[^/]+|drivers|cli)\//.exec(file);
  return match?.[1] ?? file;
}

const edges = sourceFiles().flatMap((from) => importsOf(from).map((to) => ({ from, to })));

describe('the source tree', () => {
  it('has files in the areas this test reads (an empty walk would pass anything)', () => {
    const areas = new Set(edges.map((edge) => areaOf(edge.from)));
    expect(areas).toContain('platform');
    expect(areas).toContain('resources/instances');
    expect(edges.length).toBeGreaterThan(500);
  });

  it('has no arrow from the platform to a resource or to the composition root', () => {
    const wrong = edges
      .filter((edge) => areaOf(edge.from) === 'platform' && areaOf(edge.to) !== 'platform')
      .filter((edge) => areaOf(edge.to) !== 'drivers' || !edge.to.endsWith('driver.ts'))
      .map((edge) => `${edge.from} -> ${edge.to}`);
    expect(wrong).toEqual([]);
  });

  it('has the server (main.ts) import only the platform and the composition root', () => {
    const wrong = edges
      .filter((edge) => edge.from === 'main.ts')
      .filter((edge) => areaOf(edge.to) !== 'platform' && edge.to !== 'composition.ts')
      .map((edge) => edge.to);
    expect(wrong).toEqual([]);
  });

  it('has no circle between resources', () => {
    const next = new Map<string, Set<string>>();
    for (const { from, to } of edges) {
      const a = areaOf(from);
      const b = areaOf(to);
      if (a === b || !a.startsWith('resources/') || !b.startsWith('resources/')) continue;
      if (!next.has(a)) next.set(a, new Set());
      next.get(a)?.add(b);
    }
    const circles: string[] = [];
    const walk = (start: string, at: string, trail: string[]) => {
      for (const to of next.get(at) ?? []) {
        if (to === start) circles.push([...trail, to].join(' -> '));
        else if (!trail.includes(to) && to > start) walk(start, to, [...trail, to]);
      }
    };
    for (const start of next.keys()) walk(start, start, [start]);
    expect(circles).toEqual([]);
  });

  it('lists every resource folder once in the one list (src/resources.ts), by its folder name', () => {
    const folders = readdirSync(path.join(SRC, 'resources'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    const listed = RESOURCES.map((resource) => resource.name);
    expect([...listed].sort()).toEqual(folders);
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('has resources registered nowhere but the one list: only src/resources.ts imports their index.ts', () => {
    const wrong = edges
      .filter((edge) => /^resources\/[^/]+\/index\.ts$/.test(edge.to))
      .filter((edge) => edge.from !== 'resources.ts')
      .map((edge) => `${edge.from} -> ${edge.to}`);
    expect(wrong).toEqual([]);
  });
});
