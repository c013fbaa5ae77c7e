/** Metric blocks: decode(encode(x)) is x for any block, plain or sealed; rows go where they belong. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { simulatedSample } from '../../drivers/simulator/metrics.js';
import { instanceTypeNamed } from '../catalog/catalog.js';
import {
  type Block,
  BlockAppender,
  decodeBlock,
  emptyBlock,
  encodeBlock,
  MAX_BLOCK_INTEGER,
  putRow,
} from './blocks.js';
import { metricsOf, toQuanta } from './catalog.js';
import { blockStartOf, mergeRollups, RAW, ROLLUP, rawColumnId, rollupRows, slotsOf } from './rollups.js';

const anyInteger = fc.integer({ min: -MAX_BLOCK_INTEGER, max: MAX_BLOCK_INTEGER });

/** Any block: up to 400 slots, a random subset present, up to 24 columns of any integers. */
const anyBlock: fc.Arbitrary<Block> = fc
  .record({
    slots: fc.integer({ min: 1, max: 400 }),
    ids: fc.uniqueArray(fc.integer({ min: 0, max: 1000 }), { maxLength: 24 }),
    seed: fc.array(fc.boolean(), { minLength: 400, maxLength: 400 }),
  })
  .chain(({ slots, ids, seed }) => {
    const present = [...Array(slots).keys()].filter((slot) => seed[slot]);
    return fc
      .tuple(...ids.map(() => fc.array(anyInteger, { minLength: present.length, maxLength: present.length })))
      .map((columns) => ({
        slots,
        present,
        columns: columns.map((values, i) => ({ id: ids[i] as number, values })),
      }));
  });

describe('metric blocks', () => {
  it('round-trip any block, plain and sealed', () => {
    fc.assert(
      fc.property(anyBlock, fc.boolean(), (block, seal) => {
        expect(decodeBlock(encodeBlock(block, { seal }))).toEqual(block);
      }),
    );
  });

  it('a row put in any order lands in slot order, and putting a slot again replaces it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 359 }), anyInteger, anyInteger), { maxLength: 100 }),
        (rows) => {
          const block = emptyBlock(360, [3, 7]);
          const expected = new Map<number, [number, number]>();
          for (const [slot, a, b] of rows) {
            putRow(
              block,
              slot,
              new Map([
                [3, a],
                [7, b],
              ]),
            );
            expected.set(slot, [a, b]);
          }
          const slots = [...expected.keys()].sort((x, y) => x - y);
          const decoded = decodeBlock(encodeBlock(block));
          expect(decoded.present).toEqual(slots);
          expect(decoded.columns[0]?.values).toEqual(slots.map((s) => expected.get(s)?.[0]));
          expect(decoded.columns[1]?.values).toEqual(slots.map((s) => expected.get(s)?.[1]));
        },
      ),
    );
  });

  it('refuses a row that lacks a column or a slot outside the block', () => {
    const block = emptyBlock(10, [1, 2]);
    expect(() => putRow(block, 0, new Map([[1, 5]]))).toThrow(/lacks column 2/);
    expect(() =>
      putRow(
        block,
        10,
        new Map([
          [1, 5],
          [2, 6],
        ]),
      ),
    ).toThrow(/outside/);
    expect(() => decodeBlock(Buffer.of(9))).toThrow(/unknown format/);
    expect(() => decodeBlock(encodeBlock(block).subarray(0, 2))).toThrow(/truncated/);
  });

  it('an appender filled row by row encodes exactly as encodeBlock, at every step', () => {
    fc.assert(
      fc.property(anyBlock, (block) => {
        const appender = BlockAppender.empty(
          block.slots,
          block.columns.map((c) => c.id),
        );
        expect(appender.bytes()).toEqual(encodeBlock(emptyBlock(block.slots, appender.columnIds())));
        block.present.forEach((slot, i) => {
          appender.append(
            slot,
            block.columns.map((c) => c.values[i] as number),
          );
        });
        expect(appender.bytes()).toEqual(encodeBlock(block));
        expect(appender.toBlock()).toEqual(block);
        expect(appender.points).toBe(block.present.length);
        expect(appender.latestSlot).toBe(block.present.at(-1) ?? -1);
        expect(BlockAppender.of(block).bytes()).toEqual(encodeBlock(block));
      }),
    );
  });

  it('an appender that keeps some columns encodes as the block with only those', () => {
    fc.assert(
      fc.property(anyBlock, fc.array(fc.boolean(), { minLength: 24, maxLength: 24 }), (block, keep) => {
        const kept = block.columns.filter((_, i) => keep[i]);
        const appender = BlockAppender.of(block);
        appender.keepColumns(kept.map((c) => c.id));
        expect(appender.bytes()).toEqual(encodeBlock({ ...block, columns: kept }));
      }),
    );
  });

  it('an appender refuses a slot at or before its latest, outside the block, or a row of the wrong width', () => {
    const appender = BlockAppender.empty(10, [1, 2]);
    appender.append(3, [5, 6]);
    expect(() => appender.append(3, [5, 6])).toThrow(/cannot append slot 3/);
    expect(() => appender.append(2, [5, 6])).toThrow(/cannot append slot 2/);
    expect(() => appender.append(10, [5, 6])).toThrow(/cannot append slot 10/);
    expect(() => appender.append(4, [5])).toThrow(/1 values for 2 columns/);
    expect(appender.toBlock()).toEqual({
      slots: 10,
      present: [3],
      columns: [
        { id: 1, values: [5] },
        { id: 2, values: [6] },
      ],
    });
  });

  it('rollups of an hour hold the avg, min and max of each 5-minute slot', () => {
    const hour = emptyBlock(slotsOf(RAW), [rawColumnId('cpu_percent')]);
    for (let slot = 0; slot < 60; slot++) putRow(hour, slot, new Map([[0, slot]]));
    const day = mergeRollups(null, rollupRows(hour, 3_600_000, 0));
    // Hour 1 of the day: rollup slots 12..16; slot 12 holds raw slots 0..29.
    expect(day.present).toEqual([12, 13]);
    const byId = new Map(day.columns.map((c) => [c.id, c.values]));
    expect(byId.get(0)).toEqual([15, 45]); // avg of 0..29 is 14.5, rounded; of 30..59 is 44.5
    expect(byId.get(1)).toEqual([0, 30]);
    expect(byId.get(2)).toEqual([29, 59]);
  });
});

describe('storage per instance-day (target ≤ 100 KB at 10 s, every series)', () => {
  for (const typeName of ['compute-4x', 'gpu-1x']) {
    it(`${typeName}: 24 sealed hour blocks and a day of rollups`, () => {
      const type = instanceTypeNamed(typeName);
      const spec = {
        id: `ins_${typeName}`,
        instanceType: type,
        image: 'ubuntu-22.04',
        region: 'us-east-1',
        userData: null,
        tags: {},
      };
      const metrics = metricsOf(type);
      const dayStart = blockStartOf(ROLLUP, Date.parse('2026-03-02T00:00:00Z'));
      let bytes = 0;
      let day: Block | null = null;
      for (let hour = 0; hour < 24; hour++) {
        const hourStart = dayStart + hour * RAW.blockMs;
        const block = emptyBlock(slotsOf(RAW), metrics.map(rawColumnId));
        for (let slot = 0; slot < slotsOf(RAW); slot++) {
          const sample = simulatedSample(spec, new Date(hourStart + slot * RAW.stepMs), true);
          putRow(
            block,
            slot,
            new Map(metrics.map((m) => [rawColumnId(m), toQuanta(m, sample[m] as number)])),
          );
        }
        bytes += encodeBlock(block, { seal: true }).length;
        day = mergeRollups(day, rollupRows(block, hourStart, dayStart));
      }
      bytes += encodeBlock(day as Block, { seal: true }).length;
      console.log(`${typeName}: ${bytes} bytes per instance-day`);
      expect(bytes).toBeLessThanOrEqual(100_000);
    });
  }
});
