/**
 * Invoices as PDF (pdfkit): who sells, who buys, the number, the period, the dates, one row per line item,
 * the subtotal and the total. Everything printed comes from the invoice view, so the PDF says what the
 * JSON says.
 *
 * Fonts. PDF's built-in Helvetica knows only the Windows-1252 letters, and pdfkit writes any other
 * character of it as some unrelated one (`Łódź` came out as `:ódv`), while account names and companies
 * may be in any script. So the invoice is set in DejaVu Sans, embedded (only the glyphs used), when the
 * system has it (Debian and Ubuntu: fonts-dejavu-core; it covers Latin, Greek, Cyrillic and more); without
 * it, in Helvetica, with every character Helvetica cannot show printed as `?` rather than as a wrong one.
 */
import { existsSync, readFileSync } from 'node:fs';
import PDFDocument from 'pdfkit';
import type { InvoiceView } from './view.js';

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

/** Where distributions keep DejaVu Sans (regular, bold). */
const DEJAVU_PLACES = [
  '/usr/share/fonts/truetype/dejavu', // Debian, Ubuntu
  '/usr/share/fonts/dejavu', // Alpine, Arch
  '/usr/share/fonts/dejavu-sans-fonts', // Fedora, RHEL
];

interface Fonts {
  regular: string | Buffer;
  bold: string | Buffer;
  /** What a string becomes before it is set in these fonts. */
  printable: (text: string) => string;
}

let fonts: Fonts | undefined;

/** The invoice's fonts: DejaVu Sans when the system has it (read once), otherwise Helvetica. */
export function invoiceFonts(places: readonly string[] = DEJAVU_PLACES): Fonts {
  if (fonts && places === DEJAVU_PLACES) return fonts;
  let found: Fonts | undefined;
  for (const place of places) {
    const regular = `${place}/DejaVuSans.ttf`;
    const bold = `${place}/DejaVuSans-Bold.ttf`;
    if (existsSync(regular) && existsSync(bold)) {
      found = { regular: readFileSync(regular), bold: readFileSync(bold), printable: (text) => text };
      break;
    }
  }
  found ??= { regular: 'Helvetica', bold: 'Helvetica-Bold', printable: windows1252Only };
  if (places === DEJAVU_PLACES) fonts = found;
  return found;
}

/** The characters of Windows-1252 above Latin-1's (what pdfkit's built-in fonts can show besides it). */
const WINDOWS_1252_EXTRA = new Set('€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ');

/** Every character Helvetica (Windows-1252) cannot show, as `?`. */
export function windows1252Only(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    const shown =
      (code >= 0x20 && code <= 0x7e) || (code >= 0xa0 && code <= 0xff) || WINDOWS_1252_EXTRA.has(char);
    out += shown ? char : '?';
  }
  return out;
}

/** Renders the invoice; resolves with the whole file. */
export function invoicePdf(
  view: InvoiceView,
  billTo: Party,
  chosen: Fonts = invoiceFonts(),
): Promise<Buffer> {
  const doc = new PDFDocument({
    size: 'A4',
    margin: MARGIN,
    info: { Title: `Invoice ${view.number ?? 'draft'}`, Author: SELLER.name },
  });
  doc.registerFont('Body', chosen.regular);
  doc.registerFont('Body-Bold', chosen.bold);
  // What comes from users (names in descriptions, the buyer) is made printable in the chosen font.
  const printable = chosen.printable;
  const buyer = { name: printable(billTo.name), lines: billTo.lines.map(printable) };
  const invoice = {
    ...view,
    line_items: view.line_items.map((line) => ({ ...line, description: printable(line.description) })),
  };
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });

  doc
    .font('Body-Bold')
    .fontSize(20)
    .text(invoice.status === 'draft' ? 'Draft invoice' : 'Invoice');
  doc.moveDown(0.5).font('Body').fontSize(10);
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

  doc.font('Body-Bold');
  row(
    doc,
    COLUMNS.map((column) => column.title),
  );
  doc.font('Body');
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

  doc.moveDown(1).font('Body');
  doc.text(`Subtotal (exact, to the micro-dollar): ${usd(invoice.subtotal, 6)}`, MARGIN, doc.y, {
    align: 'right',
  });
  doc.font('Body-Bold').fontSize(12);
  doc.text(`Total: ${usd(invoice.total, 2)} ${invoice.currency}`, { align: 'right' });
  doc.font('Body').fontSize(8).moveDown(1);
  doc.text(
    'Usage is metered per second from recorded state changes, and data transfer by the byte (GB = 2^30 bytes), ' +
      'and priced exactly; the total is the exact sum rounded once to the cent (half up).',
    MARGIN,
  );
  doc.end();
  return done;
}

function party(doc: PDFKit.PDFDocument, heading: string, who: Party, x: number, y: number): void {
  doc.font('Body-Bold').fontSize(10).text(heading, x, y);
  doc.font('Body').text(who.name, x);
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
