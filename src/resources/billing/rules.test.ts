/** The money rules of billing as properties: exact, integer, additive, rounded once. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  INSTANCE_TYPES,
  instanceTypeNamed,
  STORAGE_PRICES,
  VPN_PRICE_PER_HOUR_MICROS,
} from '../catalog/catalog.js';
import { VPN_PRICE_MICROS_PER_HOUR } from '../vpns/record.js';
import {
  accrue,
  billedSeconds,
  estimateLines,
  GROUP_BYS,
  groupUsage,
  instanceMeter,
  type Meter,
  monthOf,
  ratePerSecond,
  secondsPerDay,
  sumAmounts,
  totalCents,
  UNITS_PER_MICRO,
  UNITS_PER_USD,
  type UsagePiece,
  usdShown,
  vpnMeter,
} from './rules.js';

const anyType = fc.constantFrom(...INSTANCE_TYPES);
const anyMeter: fc.Arbitrary<Pick<Meter, 'unit' | 'unit_price_micros' | 'size_gb'>> = fc.oneof(
  anyType.map((type) => ({
    unit: 'hour' as const,
    unit_price_micros: type.price_per_hour_micros,
    size_gb: null,
  })),
  fc.record({
    unit: fc.constant('GB-month' as const),
    unit_price_micros: fc.constantFrom(
      STORAGE_PRICES.disk_gb_month_micros,
      STORAGE_PRICES.snapshot_gb_month_micros,
    ),
    size_gb: fc.integer({ min: 1, max: 16_384 }),
  }),
);
/** 2000 to 2100, to the millisecond. */
const anyInstant = fc.integer({ min: 946_684_800_000, max: 4_102_444_800_000 });

describe('accrual', () => {
  it('every rate per second is a whole number of units, and an interval accrues rate × seconds', () => {
    fc.assert(
      fc.property(anyMeter, fc.integer({ min: 0, max: 10 * 31 * 86_400 }), (meter, seconds) => {
        const amount = accrue(meter, seconds);
        expect(typeof amount).toBe('bigint');
        expect(amount).toBe(ratePerSecond(meter) * BigInt(seconds));
      }),
    );
  });

  it('an hour of an hourly price is that price, a 730-hour month of a GB-month price is the price per GB', () => {
    fc.assert(
      fc.property(anyMeter, (meter) => {
        if (meter.unit === 'hour')
          expect(accrue(meter, 3600)).toBe(BigInt(meter.unit_price_micros) * UNITS_PER_MICRO);
        else
          expect(accrue(meter, 730 * 3600)).toBe(
            BigInt(meter.unit_price_micros * (meter.size_gb ?? 0)) * UNITS_PER_MICRO,
          );
      }),
    );
  });

  it('splitting an interval anywhere (to the millisecond) never changes what it bills', () => {
    fc.assert(
      fc.property(
        anyMeter,
        anyInstant,
        fc.integer({ min: 0, max: 90 * 86_400_000 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }),
        (meter, start, length, cuts) => {
          const end = start + length;
          const points = [
            start,
            ...cuts.map((f) => start + Math.floor(f * length)).sort((a, b) => a - b),
            end,
          ];
          let split = 0n;
          for (let i = 1; i < points.length; i++)
            split += accrue(meter, billedSeconds(points[i - 1]!, points[i]!));
          expect(split).toBe(accrue(meter, billedSeconds(start, end)));
        },
      ),
    );
  });

  it('days of an interval add up to its seconds', () => {
    fc.assert(
      fc.property(anyInstant, fc.integer({ min: 0, max: 40 * 86_400_000 }), (start, length) => {
        const days = secondsPerDay(start, start + length);
        expect(days.reduce((sum, day) => sum + day.seconds, 0)).toBe(billedSeconds(start, start + length));
        expect(new Set(days.map((day) => day.day)).size).toBe(days.length);
      }),
    );
  });
});

const anyPiece: fc.Arbitrary<UsagePiece> = fc
  .record({
    resource: fc.constantFrom('ins_a', 'ins_b', 'vol_a', 'snap_a', 'vpn_a'),
    type: anyType,
    running: fc.boolean(),
    size: fc.integer({ min: 1, max: 2000 }),
    seconds: fc.integer({ min: 0, max: 31 * 86_400 }),
    day: fc.constantFrom('2026-03-01', '2026-03-02', '2026-03-03'),
  })
  .map(({ resource, type, running, size, seconds, day }) => {
    const base = { resource_id: resource, resource_name: resource, seconds, day };
    if (resource.startsWith('ins')) {
      const meter = instanceMeter(
        {
          id: resource,
          account_id: 'acct',
          name: resource,
          status: running ? 'running' : 'stopped',
          instance_type: type.name,
          region: 'us-east-1',
        },
        type,
      )!;
      return { ...base, ...meter };
    }
    if (resource.startsWith('vpn'))
      return {
        ...base,
        ...vpnMeter({
          id: resource,
          account_id: 'acct',
          name: resource,
          status: 'active',
          region: 'us-east-1',
        })!,
      };
    const snapshot = resource.startsWith('snap');
    return {
      ...base,
      resource_type: snapshot ? ('snapshot' as const) : ('volume' as const),
      meter: snapshot ? ('snapshot_storage' as const) : ('volume_storage' as const),
      instance_type: null,
      size_gb: size,
      unit: 'GB-month' as const,
      unit_price_micros: snapshot
        ? STORAGE_PRICES.snapshot_gb_month_micros
        : STORAGE_PRICES.disk_gb_month_micros,
    };
  });

describe('grouping and rounding', () => {
  it('every grouping bills the same exact total: grouping never rounds', () => {
    fc.assert(
      fc.property(fc.array(anyPiece, { maxLength: 40 }), (pieces) => {
        const exact = pieces.reduce((sum, piece) => sum + accrue(piece, piece.seconds), 0n);
        for (const by of GROUP_BYS) expect(sumAmounts(groupUsage(pieces, by))).toBe(exact);
      }),
    );
  });

  it('the total is the exact sum rounded once, half up, to the cent', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 24n }), (amount) => {
        const cents = totalCents(amount);
        const perCent = UNITS_PER_USD / 100n;
        // |amount − cents| ≤ half a cent, and exactly half goes up.
        const difference = amount - cents * perCent;
        expect(difference * 2n).toBeLessThan(perCent + 1n);
        expect(difference * 2n).toBeGreaterThanOrEqual(-perCent);
      }),
    );
    const halfCent = UNITS_PER_USD / 200n;
    expect(totalCents(halfCent)).toBe(1n);
    expect(totalCents(halfCent - 1n)).toBe(0n);
  });

  it('rounding lines before adding them would differ from rounding once (the reason for the rule)', () => {
    // Three lines of a third of a micro-dollar each (.4 shown as 0): shown lines add to 0, the total is 1 µ$.
    const third = UNITS_PER_MICRO / 3n;
    expect(usdShown(third)).toBe(0);
    expect(usdShown(third * 3n)).toBe(0.000001);
  });
});

describe('meters and prices', () => {
  it('a running instance pays its type; any other live status pays its root disk; deleting pays nothing', () => {
    const type = instanceTypeNamed('compute-2x');
    const instance = {
      id: 'ins_a',
      account_id: 'acct',
      name: 'a',
      instance_type: 'compute-2x',
      region: 'us-east-1',
    };
    expect(instanceMeter({ ...instance, status: 'running' }, type)).toMatchObject({
      meter: 'instance_compute',
      unit_price_micros: 100_000,
    });
    for (const status of ['starting', 'stopping', 'stopped', 'error']) {
      expect(instanceMeter({ ...instance, status }, type)).toMatchObject({
        meter: 'instance_storage',
        size_gb: 50,
      });
    }
    expect(instanceMeter({ ...instance, status: 'deleting' }, type)).toBeNull();
  });

  it('the catalogue VPN price is the one VPN records show', () => {
    expect(VPN_PRICE_PER_HOUR_MICROS).toBe(VPN_PRICE_MICROS_PER_HOUR);
  });

  it('estimates price whole hours as metering would', () => {
    const lines = estimateLines({
      instance_type: instanceTypeNamed('gpu-1x'),
      count: 2,
      hours: 730,
      volume_gb: 100,
      snapshot_gb: 40,
      transfer_gb: 0,
      vpn_count: 1,
      public_ip_count: 2,
    });
    expect(lines.map((line) => usdShown(line.amount))).toEqual([3650, 10, 2, 36.5, 7.3]);
  });

  it('months are calendar months in UTC', () => {
    expect(monthOf(new Date('2026-02-28T23:59:59.999Z')).end.toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(monthOf(new Date('2026-12-31T12:00:00Z')).end.toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });
});
