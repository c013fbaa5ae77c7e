import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALL_PERMISSIONS, covers } from '../../platform/domain/permissions.js';
import { grantedExpiry, permissionsBeyond, revocationBlockers } from './api-key-rules.js';

const permissions = fc.subarray([...ALL_PERMISSIONS]);
const date = fc.date({ min: new Date('2020-01-01'), max: new Date('2100-01-01'), noInvalidDate: true });

describe('grantedExpiry', () => {
  it('never lets a key outlive its creator, and keeps what was asked when it may', () => {
    fc.assert(
      fc.property(
        fc.option(date, { nil: null }),
        fc.option(date, { nil: undefined }),
        (creator, requested) => {
          const granted = grantedExpiry(creator, requested);
          if (creator === null) expect(granted).toEqual(requested ?? null);
          else if (requested === undefined) expect(granted).toEqual(creator);
          else if (requested.getTime() <= creator.getTime()) expect(granted).toEqual(requested);
          else expect(granted).toBeUndefined();
          if (creator !== null && granted) expect(granted.getTime()).toBeLessThanOrEqual(creator.getTime());
        },
      ),
    );
  });
});

describe('permissionsBeyond and revocationBlockers', () => {
  it('are empty exactly when the holder covers everything asked', () => {
    fc.assert(
      fc.property(permissions, permissions, (held, requested) => {
        const beyond = permissionsBeyond(held, requested);
        expect(beyond.length === 0).toBe(requested.every((p) => covers(held, p)));
        for (const p of beyond) expect(covers(held, p)).toBe(false);
      }),
    );
  });

  it('let a key always revoke itself, and another key only when it holds all of its permissions', () => {
    fc.assert(
      fc.property(permissions, permissions, fc.boolean(), (held, target, self) => {
        const blockers = revocationBlockers(
          { keyId: 'key_a', permissions: held },
          { id: self ? 'key_a' : 'key_b', permissions: target },
        );
        expect(blockers).toEqual(self ? [] : permissionsBeyond(held, target));
      }),
    );
  });

  it('never let a narrower key revoke a * key', () => {
    fc.assert(
      fc.property(permissions, (held) => {
        fc.pre(!held.includes('*'));
        expect(
          revocationBlockers({ keyId: 'a', permissions: held }, { id: 'b', permissions: ['*'] }),
        ).toEqual(['*']);
      }),
    );
  });
});
