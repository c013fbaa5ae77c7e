/**
 * What an alert notification says, per channel (issue 21, item 4), made from the data of its
 * `alert.firing` or `alert.resolved` event (the catalogue's AlertEvent), so every channel tells the same
 * facts: the policy, the instance, the value and threshold, the times and a link to the instance in the
 * console.
 *
 * - e-mail: a subject, a plain-text part and an HTML part (every value escaped);
 * - Slack incoming webhooks: `text` (the notification's fallback and preview) plus `blocks`;
 * - Discord webhooks: `content` plus one embed;
 * - generic JSON: the event itself, `{id, type, timestamp, data}`, with the notification's id.
 */
import type { EventData } from '../../platform/events/catalog.js';
import { type AlertMetric, formatValue } from './rules.js';

/** The data of an alert event, as the event catalogue declares it (platform/events/catalog.ts AlertEvent). */
export type AlertEventData = EventData<'alert.firing'>;

export type AlertEventType = 'alert.firing' | 'alert.resolved';

export interface AlertMessageInput {
  type: AlertEventType;
  /** The event's id and time. */
  eventId: string;
  timestamp: string;
  data: AlertEventData;
  /** The notification's id: sent along so a receiver can drop a repeat. */
  deliveryId: string;
}

type Phase = 'FIRING' | 'RESOLVED' | 'TEST';

function phaseOf(input: AlertMessageInput): Phase {
  if (input.data.test) return 'TEST';
  return input.type === 'alert.firing' ? 'FIRING' : 'RESOLVED';
}

/** The condition in words. */
export function conditionText(data: AlertEventData): string {
  if (data.metric !== null) {
    return `${data.metric} ${data.compare ?? 'above'} ${formatValue(data.metric as AlertMetric, data.threshold)} (average over ${data.window})`;
  }
  if (data.state === 'stuck') return `stuck in starting or stopping for more than ${data.window}`;
  return 'instance in error';
}

/** The value in words: the metric's unit, seconds for a stuck instance, nothing for an error. */
export function valueText(data: AlertEventData, value: number | null): string {
  if (value === null) return '—';
  if (data.metric !== null) return formatValue(data.metric as AlertMetric, value);
  return `${Math.round(value)} s`;
}

function thresholdText(data: AlertEventData): string {
  if (data.threshold === null) return '—';
  if (data.metric !== null) return formatValue(data.metric as AlertMetric, data.threshold);
  return `${Math.round(data.threshold)} s`;
}

function instanceText(data: AlertEventData): string {
  if (data.instance_id === null) return '(a test: no instance)';
  return data.instance_name ? `${data.instance_name} (${data.instance_id})` : data.instance_id;
}

const RESOLUTION_TEXT: Record<string, string> = {
  recovered: 'back on the good side for a whole window',
  instance_stopped: 'the instance stopped',
  instance_deleted: 'the instance was deleted',
  no_longer_targeted: 'the policy no longer watches the instance',
  monitoring_off: 'monitoring was switched off on the instance',
  policy_changed: 'the policy changed',
  policy_disabled: 'the policy was disabled',
  policy_deleted: 'the policy was deleted',
};

/** The one-line summary: `FIRING: High CPU on web-1 — cpu_percent above 80 % (average over 5m): 91.2 %`. */
export function summaryText(input: AlertMessageInput): string {
  const { data } = input;
  const where = data.instance_name ?? data.instance_id ?? 'no instance';
  const value = data.value === null ? '' : `: ${valueText(data, data.value)}`;
  return `${phaseOf(input)}: ${data.name} on ${where} — ${conditionText(data)}${value}`;
}

/** The facts as label/value rows, in the order every channel shows them. */
export function factRows(input: AlertMessageInput): [string, string][] {
  const { data } = input;
  const rows: [string, string][] = [
    ['Policy', `${data.name} (${data.alert_id})`],
    ['Condition', conditionText(data)],
    ['Instance', instanceText(data)],
    [input.type === 'alert.resolved' ? 'Last value' : 'Value', valueText(data, data.value)],
    ['Threshold', thresholdText(data)],
    ['Started', data.started_at ?? '—'],
  ];
  if (input.type === 'alert.resolved') {
    rows.push(['Resolved', data.resolved_at ?? '—']);
    if (data.resolution) rows.push(['Why', RESOLUTION_TEXT[data.resolution] ?? data.resolution]);
  }
  if (data.incident_id) rows.push(['Incident', data.incident_id]);
  return rows;
}

export interface EmailMessage {
  subject: string;
  text: string;
  html: string;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string,
  );

/** Subject, text and HTML of the e-mail. Header values are kept on one line. */
export function emailMessage(input: AlertMessageInput): EmailMessage {
  const rows = factRows(input);
  const link = input.data.console_url;
  const subject =
    `[${phaseOf(input)}] ${input.data.name} — ${input.data.instance_name ?? input.data.instance_id ?? 'test notification'}`
      .replace(/[\r\n]+/g, ' ')
      .slice(0, 200);
  const width = Math.max(...rows.map(([label]) => label.length)) + 2;
  const text = [
    summaryText(input),
    '',
    ...rows.map(([label, value]) => `${`${label}:`.padEnd(width)}${value}`),
    '',
    link ? `Open the instance in the console: ${link}` : 'There is no instance to link to.',
    '',
    `Notification ${input.deliveryId}, event ${input.eventId} at ${input.timestamp}.`,
    '',
  ].join('\n');
  const colour =
    phaseOf(input) === 'FIRING' ? '#c5221f' : phaseOf(input) === 'RESOLVED' ? '#137333' : '#5f6368';
  const html = [
    '<!doctype html>',
    '<html><body style="font-family: sans-serif">',
    `<h2 style="color: ${colour}">${escapeHtml(summaryText(input))}</h2>`,
    '<table cellpadding="4">',
    ...rows.map(
      ([label, value]) => `<tr><th align="left">${escapeHtml(label)}</th><td>${escapeHtml(value)}</td></tr>`,
    ),
    '</table>',
    link
      ? `<p><a href="${escapeHtml(link)}">Open ${escapeHtml(input.data.instance_name ?? 'the instance')} in the console</a></p>`
      : '<p>There is no instance to link to.</p>',
    `<p style="color: #5f6368; font-size: small">Notification ${escapeHtml(input.deliveryId)}, event ${escapeHtml(input.eventId)} at ${escapeHtml(input.timestamp)}.</p>`,
    '</body></html>',
    '',
  ].join('\n');
  return { subject, text, html };
}

/** Slack's mrkdwn keeps &, < and > for its own markup. */
const slackEscape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A Slack incoming-webhook body: `text` plus `blocks` (header, the facts as fields, the console link). */
export function slackBody(input: AlertMessageInput): Record<string, unknown> {
  const rows = factRows(input);
  const link = input.data.console_url;
  const blocks: Record<string, unknown>[] = [
    {
      type: 'header',
      text: { type: 'plain_text', text: `${phaseOf(input)}: ${input.data.name}`.slice(0, 150) },
    },
    {
      type: 'section',
      // Slack takes at most 10 fields per section.
      fields: rows.slice(0, 10).map(([label, value]) => ({
        type: 'mrkdwn',
        text: `*${slackEscape(label)}*\n${slackEscape(value)}`,
      })),
    },
  ];
  if (link) {
    blocks.push({
      type: 'section',
      text: { type: 'mrkdwn', text: `<${link}|Open the instance in the console>` },
    });
  }
  blocks.push({
    type: 'context',
    elements: [{ type: 'mrkdwn', text: slackEscape(`Notification ${input.deliveryId}`) }],
  });
  return { text: slackEscape(summaryText(input)), blocks };
}

const DISCORD_COLOURS: Record<Phase, number> = { FIRING: 0xc5221f, RESOLVED: 0x137333, TEST: 0x5f6368 };

/** A Discord webhook body: `content` plus one embed with the facts as fields. */
export function discordBody(input: AlertMessageInput): Record<string, unknown> {
  const rows = factRows(input);
  const link = input.data.console_url;
  return {
    content: summaryText(input).slice(0, 2000),
    embeds: [
      {
        title: `${phaseOf(input)}: ${input.data.name}`.slice(0, 256),
        description: conditionText(input.data),
        ...(link ? { url: link } : {}),
        color: DISCORD_COLOURS[phaseOf(input)],
        fields: rows.map(([label, value]) => ({
          name: label,
          value: value.slice(0, 1024),
          inline: label !== 'Condition' && label !== 'Why',
        })),
        footer: { text: `Notification ${input.deliveryId}` },
        timestamp: input.timestamp,
      },
    ],
  };
}

/** The generic JSON body: the event as a webhook receives it (unsigned), with the notification id. */
export function genericBody(input: AlertMessageInput): Record<string, unknown> {
  return {
    id: input.eventId,
    type: input.type,
    timestamp: input.timestamp,
    delivery_id: input.deliveryId,
    text: summaryText(input),
    data: input.data,
  };
}

export function chatBody(format: 'slack' | 'discord' | 'generic', input: AlertMessageInput) {
  return format === 'slack'
    ? slackBody(input)
    : format === 'discord'
      ? discordBody(input)
      : genericBody(input);
}
