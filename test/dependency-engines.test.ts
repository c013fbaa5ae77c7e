/**
 * Every package npm installs (package-lock.json, dependencies of dependencies and dev tools included)
 * runs on the Node 20 that package.json supports: a version that requires Node 22 makes `npm ci` warn
 * EBADENGINE on Node 20 and may not load there at all.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '..');
const ours = (
  JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } }
).engines.node;
const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version?: string; engines?: Record<string, string> | string[] }>;
};

/** The Node 20 releases package.json admits: from its lowest supported version to the end of 20.x. */
const lowest = semver.minVersion(ours)!;
const node20 = `>=${lowest.version} <21`;

describe('dependencies and the supported Node', () => {
  it('package.json supports Node 20 from its lowest version on', () => {
    expect(lowest.major).toBe(20);
    expect(semver.subset(node20, ours)).toBe(true);
  });

  it('every installed package admits every Node 20 release package.json supports', () => {
    const refusing: string[] = [];
    for (const [where, entry] of Object.entries(lock.packages)) {
      // An engines array (an old npm form) names no Node range.
      const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (where === '' || wanted === undefined) continue;
      if (!semver.subset(node20, wanted, { includePrerelease: false })) {
        refusing.push(`${where.replace(/^.*node_modules\//, '')}@${entry.version}: node ${wanted}`);
      }
    }
    expect(refusing).toEqual([]);
  });
});
