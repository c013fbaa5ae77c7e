/**
 * The sender against a real HTTPS receiver: a receiver that takes too long fails the attempt, a large
 * answer is cut to its excerpt, and the SSRF rule holds at connect time for addresses and for names.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../../test/helpers/webhook-receiver.js';
import { WebhookSender } from './sender.js';

let receiver: Receiver;
let extraCa = '';
beforeAll(async () => {
  receiver = await startReceiver();
  extraCa = readFileSync(receiver.caFile, 'utf8');
});
afterAll(async () => {
  await receiver?.close();
});

describe('WebhookSender', () => {
  it('fails an attempt the receiver does not answer in time', async () => {
    receiver.answer('/slow', { status: 200, delayMs: 1_000 });
    const sender = new WebhookSender({ allowPrivate: true, extraCa, timeoutMs: 200 });
    const result = await sender.send('whk_a', `${receiver.origin}/slow`, '{}', {});
    sender.close();
    expect(result).toMatchObject({ statusCode: null, error: 'No answer within 0.2 s', excerpt: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(190);
    expect(result.durationMs).toBeLessThan(1_000);
  });

  it('keeps the start of the answer only, and reports a non-2xx as an error', async () => {
    receiver.answer('/big', { status: 500, body: 'x'.repeat(200_000) });
    const sender = new WebhookSender({ allowPrivate: true, extraCa });
    const result = await sender.send('whk_a', `${receiver.origin}/big`, '{}', {});
    sender.close();
    expect(result.statusCode).toBe(500);
    expect(result.error).toBe('The receiver answered 500');
    expect(result.excerpt?.length).toBe(1024);
  });

  it('does not trust a receiver certificate it was not given', async () => {
    const sender = new WebhookSender({ allowPrivate: true, extraCa: null });
    const result = await sender.send('whk_a', `${receiver.origin}/ok`, '{}', {});
    sender.close();
    expect(result.statusCode).toBeNull();
    expect(result.error).toMatch(/certificate/i);
  });

  it('refuses a private address written in the URL, and a name that resolves to one, at connect time', async () => {
    const sender = new WebhookSender({ allowPrivate: false, extraCa });
    const before = receiver.received.length;
    const literal = await sender.send('whk_a', `${receiver.origin}/x`, '{}', {});
    expect(literal.error).toMatch(/127\.0\.0\.1 is an address webhooks may not reach/);
    const port = new URL(receiver.origin).port;
    const named = await sender.send('whk_a', `https://localhost:${port}/x`, '{}', {});
    expect(named.error).toMatch(/localhost resolves to .* which webhooks may not reach/);
    sender.close();
    expect(receiver.received.length).toBe(before);
  });
});
