/** Reading the account's events (the outbox), so users see them before webhooks exist. (Being written.) */
import type { Store } from '../store/db.js';

export class EventService {
  constructor(readonly store: Store) {}
}
