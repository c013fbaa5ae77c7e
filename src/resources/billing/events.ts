/**
 * Invoice events: their types and the shape of their data, added to the platform's catalogue
 * (platform/events/catalog.ts). The status is the record's (invoice-record.ts), after the change.
 */
import { Type } from '@sinclair/typebox';
import { entry } from '../../platform/events/catalog.js';
import { InvoiceRecord } from './invoice-record.js';

const InvoiceEvent = Type.Object({
  invoice_id: Type.String({ description: 'The invoice' }),
  ...Type.Pick(InvoiceRecord, ['status']).properties,
});

export const INVOICE_EVENTS = {
  'invoice.created': entry('An invoice was issued', InvoiceEvent),
  'invoice.paid': entry('An invoice was paid', InvoiceEvent),
  'invoice.past_due': entry('An invoice is past due; the account is past due', InvoiceEvent),
};

type InvoiceEvents = typeof INVOICE_EVENTS;
declare module '../../platform/events/catalog.js' {
  interface EventCatalog extends InvoiceEvents {}
}
