/** The VPN state table and the address rules of resources/vpns/record.ts, as properties. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isAllowed, statusAfter } from '../../platform/lifecycle/state-table.js';
import { intToIp, ipToInt } from '../addresses/addresses.js';
import {
  contains,
  cutsIntoTunnel,
  formatBlock,
  lowestFreePeerAddress,
  overlaps,
  parseBlock,
  tunnelProblem,
} from './record.js';
import { VPN_STATES, VPN_STATUSES, type VpnAction } from './states.js';

const ACTIONS = Object.keys(VPN_STATES.actions) as VpnAction[];
const anyBlock = fc
  .record({ address: fc.integer({ min: 0, max: 2 ** 32 - 1 }), bits: fc.integer({ min: 0, max: 32 }) })
  .map(({ address, bits }) => {
    const size = 2 ** (32 - bits);
    return { network: Math.floor(address / size) * size, bits };
  });

describe('the VPN state table', () => {
  it('deleting allows nothing; peers change only on a provisioning or active VPN (removal also in error)', () => {
    for (const status of VPN_STATUSES) {
      const allowed = ACTIONS.filter((a) => isAllowed(VPN_STATES, a, status));
      if (status === 'deleting') expect(allowed).toEqual([]);
      else expect(allowed).toEqual(expect.arrayContaining(['delete', 'update', 'remove_peer']));
      expect(isAllowed(VPN_STATES, 'add_peer', status)).toBe(
        status === 'provisioning' || status === 'active',
      );
    }
  });

  it('only delete changes the status a request writes', () => {
    fc.assert(
      fc.property(fc.constantFrom(...VPN_STATUSES), fc.constantFrom(...ACTIONS), (status, action) => {
        if (!isAllowed(VPN_STATES, action, status)) return;
        const after = statusAfter(VPN_STATES, action, status);
        expect(after).toBe(action === 'delete' ? 'deleting' : status);
      }),
    );
  });
});

describe('CIDR blocks', () => {
  it('a formatted block parses back to itself; host bits are refused naming the network', () => {
    fc.assert(
      fc.property(anyBlock, (block) => {
        expect(parseBlock(formatBlock(block))).toEqual(block);
        if (block.bits < 32) {
          const withHost = `${intToIp(block.network + 1)}/${block.bits}`;
          const refused = parseBlock(withHost);
          expect(refused).toHaveProperty('error');
          expect((refused as { error: string }).error).toContain(formatBlock(block));
        }
      }),
    );
  });

  it('containment implies overlap; overlap is symmetric; a block that cuts into a tunnel overlaps it without containing it', () => {
    fc.assert(
      fc.property(anyBlock, anyBlock, (a, b) => {
        if (contains(a, b)) expect(overlaps(a, b)).toBe(true);
        expect(overlaps(a, b)).toBe(overlaps(b, a));
        expect(cutsIntoTunnel(formatBlock(a), formatBlock(b))).toBe(overlaps(a, b) && !contains(a, b));
      }),
    );
  });

  it('refuses malformed text', () => {
    for (const text of [
      '10.0.0.0',
      '10.0.0/8',
      '10.0.0.0/33',
      '256.0.0.0/8',
      '01.0.0.0/8',
      ' 10.0.0.0/8',
      'a.b.c.d/8',
    ]) {
      expect(parseBlock(text), text).toHaveProperty('error');
    }
  });
});

describe('tunnel networks and peer addresses', () => {
  it('a tunnel must be private or CGNAT space, /16–/29, clear of the region network', () => {
    expect(tunnelProblem('100.96.0.0/24', 'us-east-1')).toBeNull();
    expect(tunnelProblem('10.20.0.0/24', 'us-east-1')).toBeNull();
    expect(tunnelProblem('10.20.0.0/24', 'us-west-2')).toContain('overlaps the private network');
    expect(tunnelProblem('10.0.0.0/8', 'us-east-1')).toContain('/16 to /29');
    expect(tunnelProblem('100.128.0.0/24', 'us-east-1')).toContain('private or shared');
  });

  it('hands out the lowest free address, never a held one, never the network, gateway or broadcast address', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 24, max: 29 }),
        fc.array(fc.nat(300), { maxLength: 300 }),
        (bits, picks) => {
          const tunnel = `172.16.0.0/${bits}`;
          const size = 2 ** (32 - bits);
          const held = new Set<string>();
          for (const pick of picks) {
            const next = lowestFreePeerAddress(tunnel, held);
            if (next === null) {
              expect(held.size).toBe(size - 3);
              // Removing any held address frees exactly that one.
              const freed = [...held][pick % held.size] as string;
              held.delete(freed);
              expect(lowestFreePeerAddress(tunnel, held)).toBe(freed);
              continue;
            }
            const offset = ipToInt(next) - ipToInt('172.16.0.0');
            expect(offset).toBeGreaterThanOrEqual(2);
            expect(offset).toBeLessThanOrEqual(size - 2);
            expect(held.has(next)).toBe(false);
            for (let lower = 2; lower < offset; lower++)
              expect(held.has(intToIp(ipToInt('172.16.0.0') + lower))).toBe(true);
            held.add(next);
          }
        },
      ),
    );
  });
});
