import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AlertEventData, discordBody, emailMessage, genericBody, slackBody } from './messages.js';
import { channelsProblem, conditionOf, formatValue, isProblem, isTargeted, metricValue } from './rules.js';
import { SampleRing, windowSlots } from './windows.js';

const none = { metric: null, compare: null, threshold: null, window: null, state: null };

describe('policy conditions', () => {
  it('takes a whole metric threshold or a state, and says which field is wrong otherwise', () => {
    expect(
      conditionOf({ ...none, metric: 'cpu_percent', compare: 'above', threshold: 80, window: '5m' }),
    ).toEqual({
      kind: 'metric',
      metric: 'cpu_percent',
      compare: 'above',
      threshold: 80,
      window: '5m',
    });
    expect(conditionOf({ ...none, state: 'stuck', window: '10m' })).toEqual({
      kind: 'state',
      state: 'stuck',
      window: '10m',
    });
    const field = (fields: Partial<typeof none>) => {
      const result = conditionOf({ ...none, ...fields } as never);
      return isProblem(result) ? result.field : null;
    };
    expect(field({})).toBe('metric');
    expect(field({ metric: 'cpu_percent' } as never)).toBe('compare');
    expect(field({ metric: 'cpu_percent', compare: 'below' } as never)).toBe('threshold');
    expect(field({ metric: 'cpu_percent', compare: 'below', threshold: 5 } as never)).toBe('window');
    expect(field({ metric: 'cpu_percent', compare: 'below', threshold: 101, window: '1m' } as never)).toBe(
      'threshold',
    );
    expect(field({ metric: 'net_tx_bps', compare: 'below', threshold: -1, window: '1m' } as never)).toBe(
      'threshold',
    );
    expect(field({ metric: 'net_tx_bps', state: 'error' } as never)).toBe('state');
    expect(field({ state: 'stuck' } as never)).toBe('window');
    expect(field({ state: 'error', window: '1m' } as never)).toBe('window');
    expect(field({ state: 'error', threshold: 3 } as never)).toBe('threshold');
  });

  it('channels need one target at least, well-formed and without repeats', () => {
    const empty = { email: [], webhook_ids: [], chat: [] };
    expect(channelsProblem(empty)?.field).toBe('channels');
    expect(channelsProblem({ ...empty, email: ['a@example.com'] })).toBeNull();
    expect(channelsProblem({ ...empty, email: ['nope'] })?.field).toBe('channels.email.0');
    expect(channelsProblem({ ...empty, webhook_ids: ['whk_1', 'whk_1'] })?.field).toBe(
      'channels.webhook_ids.1',
    );
  });
});

describe('targets', () => {
  const instance = { id: 'ins_1', tags: { env: 'prod', team: 'web' } };
  it('with neither ids nor tags: every instance', () => {
    expect(isTargeted({ instance_ids: [], tags: {} }, instance)).toBe(true);
  });
  it('listed ids, or every tag given', () => {
    expect(isTargeted({ instance_ids: ['ins_2'], tags: {} }, instance)).toBe(false);
    expect(isTargeted({ instance_ids: ['ins_1'], tags: {} }, instance)).toBe(true);
    expect(isTargeted({ instance_ids: [], tags: { env: 'prod' } }, instance)).toBe(true);
    expect(isTargeted({ instance_ids: [], tags: { env: 'prod', team: 'db' } }, instance)).toBe(false);
    expect(isTargeted({ instance_ids: ['ins_2'], tags: { team: 'web' } }, instance)).toBe(true);
  });
});

describe('metric values', () => {
  const sample = {
    timestamp: '2026-01-01T00:00:00.000Z',
    cpu_percent: 42.5,
    memory_used_bytes: 1024,
    memory_total_bytes: 4096,
    disk_read_bps: 1,
    disk_write_bps: 2,
    net_rx_bps: 3,
    net_tx_bps: 4,
  };
  it('memory_percent is used over total; gpu_percent only where there is a GPU', () => {
    expect(metricValue('memory_percent', sample)).toBe(25);
    expect(metricValue('cpu_percent', sample)).toBe(42.5);
    expect(metricValue('gpu_percent', sample)).toBeNull();
    expect(metricValue('gpu_percent', { ...sample, gpu_percent: 7 })).toBe(7);
  });
  it('reads in its unit', () => {
    expect(formatValue('cpu_percent', 80)).toBe('80 %');
    expect(formatValue('cpu_percent', 91.25)).toBe('91.3 %');
    expect(formatValue('net_rx_bps', 12_500_000)).toBe('12.5 MB/s');
    expect(formatValue('net_rx_bps', 999)).toBe('999 B/s');
  });
});

describe('windows', () => {
  const ring = (values: (number | null)[], capacity = values.length) => {
    const made = new SampleRing(capacity);
    values.forEach((value, i) => {
      if (value !== null) made.put(1000 + i, value);
    });
    return made;
  };

  it('a window is covered when its first and last slots hold samples; a gap is skipped, not a zero', () => {
    const full = ring([95, 95, 95, 95, 95, 95]).window(1005, 6, 'above', 80);
    expect(full).toEqual({ covered: true, average: 95, samples: 6, allGood: false });
    const gap = ring([95, null, 95, 95, 95, 95]).window(1005, 6, 'above', 80);
    expect(gap).toMatchObject({ covered: true, average: 95, samples: 5 });
    const late = ring([null, 95, 95, 95, 95, 95]).window(1005, 6, 'above', 80);
    expect(late.covered).toBe(false);
    const good = ring([70, 70, 70, 70, 70, 70]).window(1005, 6, 'above', 80);
    expect(good).toMatchObject({ covered: true, allGood: true, average: 70 });
  });

  it('the worked example of docs/api.md: fires on the sixth 95, resolves six samples after the last bad one', () => {
    // 12:00:10 … 12:02:20, one sample every 10 s.
    const samples = [95, 95, 95, 95, 95, 95, 70, 90, 70, 70, 70, 70, 70, 70];
    const made = new SampleRing(windowSlots(60_000, 10_000));
    let open = false;
    const transitions: string[] = [];
    samples.forEach((value, i) => {
      made.put(1 + i, value);
      const stats = made.window(1 + i, 6, 'above', 80);
      if (!open && stats.covered && (stats.average as number) > 80) {
        open = true;
        transitions.push(`fire@${i}`);
      } else if (open && stats.allGood) {
        open = false;
        transitions.push(`resolve@${i}`);
      }
    });
    expect(transitions).toEqual(['fire@5', 'resolve@13']);
  });

  it('putting a sample twice changes nothing; an old slot is overwritten by the ring going round', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 100, noNaN: true }), { minLength: 1, maxLength: 50 }),
        (values) => {
          const made = new SampleRing(10);
          for (const [i, value] of values.entries()) made.put(100 + i, value);
          const last = 100 + values.length - 1;
          for (let i = 0; i < values.length; i++) {
            const expected = last - (100 + i) < 10 ? values[i] : undefined;
            expect(made.get(100 + i)).toBe(expected);
          }
          const before = made.window(last, 10, 'below', 50);
          values.forEach((value, i) => {
            if (last - (100 + i) < 10) made.put(100 + i, value);
          });
          expect(made.window(last, 10, 'below', 50)).toEqual(before);
        },
      ),
    );
  });
});

describe('messages', () => {
  const data: AlertEventData = {
    alert_id: 'alr_1',
    incident_id: 'inc_1',
    name: 'High <CPU> & "friends"',
    instance_id: 'ins_1',
    instance_name: 'web-1',
    metric: 'cpu_percent',
    compare: 'above',
    state: null,
    window: '5m',
    value: 91.25,
    threshold: 80,
    started_at: '2026-04-06T12:01:00.000Z',
    resolved_at: null,
    resolution: null,
    console_url: 'https://console.example/console/instances/ins_1',
  };
  const input = {
    type: 'alert.firing' as const,
    eventId: 'evt_1',
    timestamp: data.started_at as string,
    data,
    deliveryId: 'dlv_1',
  };

  it('e-mail: the facts in the text and in escaped HTML, with the console link', () => {
    const mail = emailMessage(input);
    expect(mail.subject).toBe('[FIRING] High <CPU> & "friends" — web-1');
    expect(mail.text).toContain('Value:');
    expect(mail.text).toContain('91.3 %');
    expect(mail.text).toContain(
      'Open the instance in the console: https://console.example/console/instances/ins_1',
    );
    expect(mail.html).toContain('High &lt;CPU&gt; &amp; &quot;friends&quot;');
    expect(mail.html).not.toContain('<CPU>');
    expect(mail.html).toContain('<a href="https://console.example/console/instances/ins_1">');
  });

  it('Slack escapes its markup characters; Discord keeps within its limits; generic is the event', () => {
    const slack = slackBody(input) as { text: string; blocks: { type: string; fields?: unknown[] }[] };
    expect(slack.text).toContain('High &lt;CPU&gt; &amp;');
    expect(slack.blocks.find((b) => b.type === 'section')?.fields?.length).toBeLessThanOrEqual(10);
    const discord = discordBody({ ...input, data: { ...data, name: 'x'.repeat(300) } }) as {
      content: string;
      embeds: { title: string }[];
    };
    expect(discord.embeds[0]?.title.length).toBeLessThanOrEqual(256);
    expect(genericBody(input)).toMatchObject({
      id: 'evt_1',
      type: 'alert.firing',
      delivery_id: 'dlv_1',
      data,
    });
  });

  it('a resolved stuck incident says seconds and why', () => {
    const resolved = emailMessage({
      ...input,
      type: 'alert.resolved',
      data: {
        ...data,
        metric: null,
        compare: null,
        state: 'stuck',
        window: '10m',
        value: 640,
        threshold: 600,
        resolved_at: '2026-04-06T12:20:00.000Z',
        resolution: 'instance_stopped',
      },
    });
    expect(resolved.subject.startsWith('[RESOLVED]')).toBe(true);
    expect(resolved.text).toContain('640 s');
    expect(resolved.text).toContain('600 s');
    expect(resolved.text).toContain('the instance stopped');
  });
});
