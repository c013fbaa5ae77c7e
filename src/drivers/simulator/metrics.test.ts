/** The simulator's samples: deterministic per instance and second, with a daily rhythm, spikes and GPU load. */
import { describe, expect, it } from 'vitest';
import { instanceTypeNamed } from '../../resources/catalog/catalog.js';
import type { MachineSpec } from '../driver.js';
import { simulatedSample } from './metrics.js';

const spec = (id: string, type = 'compute-2x'): MachineSpec => ({
  id,
  instanceType: instanceTypeNamed(type),
  image: 'ubuntu-22.04',
  region: 'us-east-1',
  userData: null,
  tags: {},
});
const DAY = Date.parse('2026-03-02T00:00:00Z');
const at = (hour: number, second = 0) => new Date(DAY + hour * 3_600_000 + second * 1000);

describe('simulated metrics', () => {
  it('are the same for the same instance and second, and differ between instances', () => {
    expect(simulatedSample(spec('ins_a'), at(10, 3), true)).toEqual(
      simulatedSample(spec('ins_a'), at(10, 3), true),
    );
    expect(simulatedSample(spec('ins_a'), at(10, 3), true)).not.toEqual(
      simulatedSample(spec('ins_b'), at(10, 3), true),
    );
  });

  it('follow a daily rhythm: afternoons are busier than nights across a fleet', () => {
    const fleet = Array.from({ length: 50 }, (_, i) => spec(`ins_fleet${i}`));
    const mean = (hour: number) =>
      fleet.reduce((sum, machine) => sum + simulatedSample(machine, at(hour), true).cpu_percent, 0) /
      fleet.length;
    expect(mean(15)).toBeGreaterThan(mean(3) * 1.5);
  });

  it('spike now and then: some minutes of a day jump well above the minutes around them', () => {
    const machine = spec('ins_spiky');
    const minutes = Array.from(
      { length: 24 * 60 },
      (_, m) => simulatedSample(machine, at(0, m * 60), true).cpu_percent,
    );
    const jumps = minutes.filter((value, m) => m > 5 && value - (minutes[m - 5] as number) > 18).length;
    expect(jumps).toBeGreaterThan(0);
    expect(jumps).toBeLessThan(120);
  });

  it('stay within bounds, carry memory_total_bytes, and gpu_percent on GPU types only', () => {
    for (let second = 0; second < 86_400; second += 97) {
      const sample = simulatedSample(spec('ins_gpu', 'gpu-1x'), new Date(DAY + second * 1000), true);
      expect(sample.cpu_percent).toBeGreaterThanOrEqual(0);
      expect(sample.cpu_percent).toBeLessThanOrEqual(100);
      expect(sample.gpu_percent).toBeGreaterThanOrEqual(0);
      expect(sample.gpu_percent).toBeLessThanOrEqual(100);
      expect(sample.memory_used_bytes).toBeLessThan(sample.memory_total_bytes);
      expect(sample.memory_total_bytes).toBe(64 * 1024 ** 3);
    }
    expect(simulatedSample(spec('ins_cpu'), at(1), true)).not.toHaveProperty('gpu_percent');
  });

  it('are zero when the machine is not running', () => {
    const sample = simulatedSample(spec('ins_off', 'gpu-1x'), at(12), false);
    expect(sample).toMatchObject({ cpu_percent: 0, memory_used_bytes: 0, net_rx_bps: 0, gpu_percent: 0 });
  });
});
