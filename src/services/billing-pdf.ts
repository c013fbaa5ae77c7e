/**
 * Invoices as PDF (pdfkit, with its built-in Helvetica, so no font files are needed): who sells, who
 * buys, the number, the period, the dates, one row per line item, the subtotal and the total. Everything
 * printed comes from the invoice view, so the PDF says what the JSON says.
 */
import PDFDocument from 'pdfkit';
import type { InvoiceView } from './billing-view.js';

export interface Party {
  name: string;
  lines: readonly string[];
}

export const SELLER: Party = {
  name: 'Nimbus Cloud',
  lines: ['Self-hosted compute platform', 'billing@nimbus.example.net'],
};

const usd = (value: number, decimals: number) => `$${value.toFixed(decimals)}`;

const MARGIN = 50;
const COLUMNS = [
  { title: 'Description', x: MARGIN, width: 250, align: 'left' },
  { title: 'Quantity', x: 305, width: 70, align: 'right' },
  { title: 'Unit', x: 380, width: 55, align: 'left' },
  { title: 'Unit price', x: 435, width: 50, align: 'right' },
  { title: 'Amount', x: 490, width: 72, align: 'right' },
] as const;

/** Renders the invoice; resolves with the whole file. */
export function invoicePdf(invoice: InvoiceView, buyer: Party): Promise<Buffer> {
  const doc = new PDFDocument({
    size: 'A4',
    margin: MARGIN,
    info: { Title: `Invoice ${invoice.number ?? 'draft'}`, Author: SELLER.name },
  });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });

  doc
    .font('Helvetica-Bold')
    .fontSize(20)
    .text(invoice.status === 'draft' ? 'Draft invoice' : 'Invoice');
  doc.moveDown(0.5).font('Helvetica').fontSize(10);
  doc.text(`Invoice number: ${invoice.number ?? 'not issued yet (draft)'}`);
  doc.text(`Invoice id: ${invoice.id}`);
  doc.text(
    `Period: ${invoice.period} (${invoice.period_start.slice(0, 10)} to ${invoice.period_end.slice(0, 10)}, end exclusive)`,
  );
  doc.text(`Status: ${invoice.status}`);
  if (invoice.issued_at) doc.text(`Issued: ${invoice.issued_at.slice(0, 10)}`);
  if (invoice.due_at) doc.text(`Due: ${invoice.due_at.slice(0, 10)}`);

  const top = doc.y + 15;
  party(doc, 'From', SELLER, MARGIN, top);
  party(doc, 'Bill to', buyer, 305, top);
  doc.y = top + 80;

  doc.font('Helvetica-Bold');
  row(
    doc,
    COLUMNS.map((column) => column.title),
  );
  doc.font('Helvetica');
  for (const line of invoice.line_items) {
    if (doc.y > doc.page.height - 120) doc.addPage();
    row(doc, [
      line.description,
      line.quantity.toFixed(6),
      line.unit,
      line.unit_price === null ? '' : usd(line.unit_price, 6),
      usd(line.amount, 6),
    ]);
  }
  if (invoice.line_items.length === 0) row(doc, ['No usage in this period', '', '', '', usd(0, 6)]);

  doc.moveDown(1).font('Helvetica');
  doc.text(`Subtotal (exact, to the micro-dollar): ${usd(invoice.subtotal, 6)}`, MARGIN, doc.y, {
    align: 'right',
  });
  doc.font('Helvetica-Bold').fontSize(12);
  doc.text(`Total: ${usd(invoice.total, 2)} ${invoice.currency}`, { align: 'right' });
  doc.font('Helvetica').fontSize(8).moveDown(1);
  doc.text(
    'Usage is metered per second from recorded state changes and priced exactly; the total is the exact sum ' +
      'rounded once to the cent (half up).',
    MARGIN,
  );
  doc.end();
  return done;
}

function party(doc: PDFKit.PDFDocument, heading: string, who: Party, x: number, y: number): void {
  doc.font('Helvetica-Bold').fontSize(10).text(heading, x, y);
  doc.font('Helvetica').text(who.name, x);
  for (const line of who.lines) doc.text(line, x);
}

function row(doc: PDFKit.PDFDocument, cells: readonly string[]): void {
  const y = doc.y;
  let bottom = y;
  cells.forEach((cell, index) => {
    const column = COLUMNS[index]!;
    doc.text(cell, column.x, y, { width: column.width, align: column.align });
    bottom = Math.max(bottom, doc.y);
  });
  doc.x = MARGIN;
  doc.y = bottom + 4;
}
