/**
 * What happens to an instance's address when the instance is gone: written by the outbox subscriber of
 * `instance.deleted`, in the transaction that removes the instance row, so the address and its instance
 * never disagree. An address made with the instance (`auto_delete`) is released; one the user keeps is
 * unassigned and starts paying `public_ip_idle`.
 *
 * A module-level function, so a process that composes the services twice subscribes it once; its time is
 * the event's.
 */
import type { Clock } from '../../platform/domain/clock.js';
import type { EventSubscriber } from '../../platform/events/outbox.js';
import { switchMeter } from '../billing/meter-store.js';
import { publicIpMeter } from '../billing/rules.js';
import { recordPublicIpEvent, removePublicIp } from './service.js';
import { publicIpOfInstance, updatePublicIp } from './store.js';

export const releaseWithInstance: EventSubscriber = async (trx, event) => {
  if (event.type !== 'instance.deleted') return;
  const ip = await publicIpOfInstance(trx, event.resourceId);
  if (!ip) return;
  const now = event.recordedAt;
  const clock: Clock = { now: () => now, nowMs: () => now.getTime() };
  if (ip.auto_delete) {
    await removePublicIp(trx, now, ip);
    await recordPublicIpEvent(trx, clock, ip, 'public_ip.deleted');
    return;
  }
  const kept = await updatePublicIp(trx, ip, {
    instance_id: null,
    assigned_at: null,
    updated_at: now.toISOString(),
  });
  if (!kept) throw new Error(`public IP ${ip.id} changed under its instance's delete`);
  await switchMeter(trx, kept.id, publicIpMeter(kept), now);
  await recordPublicIpEvent(trx, clock, ip, 'public_ip.unassigned');
};
