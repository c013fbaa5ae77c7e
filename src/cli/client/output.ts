/**
 * How results reach stdout. `-o table` (default) and `-o wide` draw a borderless table whose columns each
 * resource chooses (wide adds more), fitted to the terminal's width by shortening the widest columns;
 * `-o json` prints the API's `data` exactly (a list is the array of items; with `--all`, of every page's
 * items), `-o yaml` the same as YAML. Colour only on a terminal and never with NO_COLOR, so piped output
 * is plain text a script can cut.
 */
import { styleText } from 'node:util';
import Table from 'cli-table3';
import YAML from 'yaml';
import { UsageError } from './exit-codes.js';

export const OUTPUT_FORMATS = ['table', 'wide', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** One column of a resource's table. */
export interface Column {
  header: string;
  value: (item: Record<string, unknown>) => unknown;
  /** Shown only with `-o wide`. */
  wide?: boolean;
}

export interface OutputSettings {
  format: OutputFormat;
  headers: boolean;
  color: boolean;
  /** The terminal's width, or null when stdout is not a terminal (nothing is shortened then). */
  width: number | null;
  write: (text: string) => void;
}

export function parseOutputFormat(value: string): OutputFormat {
  if ((OUTPUT_FORMATS as readonly string[]).includes(value)) return value as OutputFormat;
  throw new UsageError(`-o ${value}: the output format is one of ${OUTPUT_FORMATS.join(', ')}`);
}

/** Colour when stdout is a terminal and NO_COLOR (https://no-color.org) is unset or empty. */
export function colorWanted(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && !env.NO_COLOR && env.TERM !== 'dumb';
}

const STATUS_COLORS: Record<string, 'green' | 'yellow' | 'red' | 'gray'> = {
  running: 'green',
  active: 'green',
  available: 'green',
  'in-use': 'green',
  succeeded: 'green',
  stopped: 'gray',
  error: 'red',
  failed: 'red',
};

/** A value as one line of table text: lists joined, objects as key=value, absent as "-". */
export function cellText(value: unknown): string {
  if (value === null || value === undefined || value === '') return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map(cellText).join(', ');
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return '-';
    return entries
      .map(([key, inner]) => `${key}=${typeof inner === 'object' ? JSON.stringify(inner) : inner}`)
      .join(', ');
  }
  return String(value).replace(/\s*\n\s*/g, ' ');
}

/**
 * Column widths that fit `width`, giving up as little as possible: the widest column loses one character
 * at a time until the table fits. First only down to each column's header (or 8 characters), the first
 * column (the id, or the field name: what users copy into the next command) untouched, so long names and
 * addresses are shortened with "…" before anything else; if that is not enough, every column but the first
 * goes down to 4, and last the first one too.
 */
export function fitWidths(natural: number[], headers: string[], width: number | null, gap: number): number[] {
  const widths = [...natural];
  if (width === null) return widths;
  const floors: ((i: number) => number)[] = [
    (i) => (i === 0 ? natural[i]! : Math.min(natural[i]!, Math.max(headers[i]!.length, 8))),
    (i) => (i === 0 ? natural[i]! : Math.min(natural[i]!, 4)),
    (i) => Math.min(natural[i]!, 4),
  ];
  const total = () => widths.reduce((sum, w) => sum + w, 0) + gap * (widths.length - 1);
  for (const floor of floors) {
    while (total() > width) {
      let widest = -1;
      for (let i = 0; i < widths.length; i++) {
        if (widths[i]! > floor(i) && (widest === -1 || widths[i]! > widths[widest]!)) widest = i;
      }
      if (widest === -1) break;
      widths[widest]! -= 1;
    }
  }
  return widths;
}

const GAP = 3;

export function renderTable(headers: string[], rows: string[][], settings: OutputSettings): string {
  const natural = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => row[i]!.length)));
  const widths = fitWidths(natural, headers, settings.width, GAP);
  const table = new Table({
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: ' '.repeat(GAP),
    },
    style: { 'padding-left': 0, 'padding-right': 0, head: [], border: [] },
    colWidths: widths,
    wordWrap: false,
  });
  if (settings.headers) {
    table.push(headers.map((header) => (settings.color ? styleText('bold', header) : header)));
  }
  for (const row of rows) {
    table.push(
      row.map((cell) => {
        const color = settings.color ? STATUS_COLORS[cell] : undefined;
        return color ? styleText(color, cell) : cell;
      }),
    );
  }
  // cli-table3 pads the last column too; trailing blanks only get in a script's way.
  return table.length === 0 ? '' : `${table.toString().replace(/ +$/gm, '')}\n`;
}

function structured(data: unknown, settings: OutputSettings): boolean {
  if (settings.format === 'json') {
    settings.write(`${JSON.stringify(data, null, 2)}\n`);
    return true;
  }
  if (settings.format === 'yaml') {
    settings.write(YAML.stringify(data));
    return true;
  }
  return false;
}

/** A list of items: one row per item. */
export function printList(
  items: Record<string, unknown>[],
  columns: Column[],
  settings: OutputSettings,
): void {
  if (structured(items, settings)) return;
  const shown = columns.filter((column) => settings.format === 'wide' || !column.wide);
  const rows = items.map((item) => shown.map((column) => cellText(column.value(item))));
  settings.write(
    renderTable(
      shown.map((column) => column.header),
      rows,
      settings,
    ),
  );
}

/** One resource: every field it has, one per line (FIELD, VALUE). */
export function printOne(item: Record<string, unknown>, settings: OutputSettings): void {
  if (structured(item, settings)) return;
  const rows = Object.entries(item).map(([field, value]) => [field, cellText(value)]);
  settings.write(renderTable(['FIELD', 'VALUE'], rows, settings));
}

/** A short confirmation for table output (json and yaml print the data instead, or nothing). */
export function printMessage(message: string, settings: OutputSettings): void {
  if (settings.format === 'table' || settings.format === 'wide') settings.write(`${message}\n`);
}
