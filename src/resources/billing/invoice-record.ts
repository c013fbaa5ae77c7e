/**
 * The invoice record: the one declaration of its fields, as the services see them (the store's row
 * decoded: invoice-store.ts). Amounts are exact integers (bigint: resources/billing/rules.ts units), so
 * the API view (routes.ts `Invoice`) is computed from it (numbers as text, amounts in dollars); the fields
 * it shows as they are (id, status, the timestamps) and the data of its events (events.ts, picked) take
 * their declaration from here.
 */
import { type Static, Type } from '@sinclair/typebox';
import { StringEnum, Timestamp } from '../../platform/http/schemas.js';
import { INVOICE_STATUSES } from './invoice-rules.js';

export const InvoiceRecord = Type.Object({
  id: Type.String(),
  account_id: Type.String(),
  number: Type.Union([Type.Integer(), Type.Null()]),
  status: StringEnum(INVOICE_STATUSES, {
    description: '`draft` (the running month, live) → `open` (period closed) → `paid` | `void`',
  }),
  period_start: Timestamp,
  period_end: Timestamp,
  /** Exact amount (resources/billing/rules.ts units); for a draft, as of when it was last read. */
  subtotal: Type.BigInt(),
  total_cents: Type.BigInt(),
  issued_at: Type.Union([Timestamp, Type.Null()]),
  due_at: Type.Union([Timestamp, Type.Null()]),
  past_due_at: Type.Union([Timestamp, Type.Null()]),
  paid_at: Type.Union([Timestamp, Type.Null()]),
  voided_at: Type.Union([Timestamp, Type.Null()]),
  version: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Invoice = Static<typeof InvoiceRecord>;
