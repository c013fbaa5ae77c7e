/**
 * What a user calls a resource and tags it with: the same rules for instances, volumes, snapshots, VPNs
 * and firewall rules (docs/design.md, "Instance record": user-chosen fields).
 */
import { InvalidRequest } from '../errors.js';

/** A resource's name: 1–64 characters of letters, digits, `.`, `_` and `-`. */
export const RESOURCE_NAME_PATTERN = '^[A-Za-z0-9._-]{1,64}$';
export const MAX_TAGS = 50;
/** Tag keys may not contain ':' — the `tag=key:value` filter splits on the first one. */
export const TAG_KEY_PATTERN = '^[A-Za-z0-9._/-]{1,128}$';
export const TAG_VALUE_MAX_LENGTH = 256;

const tagKeyPattern = new RegExp(TAG_KEY_PATTERN);

/**
 * Refuses a tag key outside TAG_KEY_PATTERN (the JSON Schema of a record cannot constrain keys); `field`
 * names where the tags were given (a firewall rule's `targets.tags`).
 */
export function checkTagKeys(tags: Record<string, string> | undefined, field = 'tags'): void {
  const bad = Object.keys(tags ?? {}).find((key) => !tagKeyPattern.test(key));
  if (bad !== undefined) {
    throw new InvalidRequest(
      'Tag keys are 1–128 characters of letters, digits, ".", "_", "/" and "-" (no ":", which tag filters split on)',
      { field, value: bad },
    );
  }
}

/** A `tag=key:value` list filter as its key and value (the value may itself contain ':'). */
export function parseTagFilter(filter: string): [string, string] {
  const colon = filter.indexOf(':');
  if (colon <= 0) {
    throw new InvalidRequest('tag filters are key:value', { field: 'tag', value: filter });
  }
  return [filter.slice(0, colon), filter.slice(colon + 1)];
}

export function sameTags(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}
