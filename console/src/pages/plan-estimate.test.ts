/** The plan calculator's lines as the POST /v1/billing/estimate body, and each line's summary. */
import { describe, expect, it } from 'vitest';
import { lineSummary, newLine, planBody } from './plan-estimate.ts';

describe('planBody', () => {
  it('makes one item per line, in order, with the numbers as numbers', () => {
    const web = { ...newLine(1), count: '3', region: 'eu-central-1', volumeGb: '100' };
    const storage = { ...newLine(2), instanceType: '', snapshotGb: '40', vpnCount: '1', hours: '24' };
    expect(planBody([web, storage])).toEqual({
      items: [
        {
          instance_type: 'compute-2x',
          count: 3,
          region: 'eu-central-1',
          hours: 730,
          volume_gb: 100,
          snapshot_gb: 0,
          vpn_count: 0,
        },
        { hours: 24, volume_gb: 0, snapshot_gb: 40, vpn_count: 1 },
      ],
    });
  });

  it('leaves the region to the API when any region will do', () => {
    expect(planBody([newLine(1)]).items[0]).not.toHaveProperty('region');
  });
});

describe('lineSummary', () => {
  it('names what a line holds', () => {
    expect(lineSummary({ ...newLine(1), count: '3', region: 'eu-central-1', volumeGb: '100' })).toBe(
      '3 × compute-2x in eu-central-1, 100 GB volumes for 730 h',
    );
    expect(lineSummary({ ...newLine(1), instanceType: '', vpnCount: '2' })).toBe('2 VPN gateways for 730 h');
    expect(lineSummary({ ...newLine(1), instanceType: '' })).toBe('nothing for 730 h');
  });
});
