import type { Executor } from './schema.js';

export interface NewEvent {
  id: string;
  account_id: string;
  type: string;
  resource_id: string;
  data: Record<string, unknown>;
  created_at: string;
}

/** Call inside the transaction that makes the change the event reports (transactional outbox). */
export async function insertEvent(db: Executor, event: NewEvent): Promise<void> {
  await db
    .insertInto('events')
    .values({ ...event, data: JSON.stringify(event.data) })
    .execute();
}
