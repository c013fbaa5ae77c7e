/**
 * List cursors of /v2 (docs/design.md, "Versions and cursors"): opaque to clients, tamper-evident, and bound to the
 * list they were made for.
 *
 * A cursor is `base64url(JSON of CursorContent)` + "." + `base64url(HMAC-SHA256(key, first part))`, the
 * MAC cut to 128 bits. It carries the keyset position (the sort value and id of the row the next page
 * starts after), the direction, the sort and order, and a digest of everything else that selects the
 * rows (route, path parameters, filters). The server keeps no state for it; any replica sharing the key
 * (derived from the deployment's master key, SecretBox.deriveKey) opens any other's cursors.
 *
 * What a cursor does NOT promise: a snapshot. Rows created or deleted between two pages move the
 * boundary as they would for any keyset walk, but no row is ever seen twice or skipped unless it moved.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { KeysetDirection, KeysetPosition, SortOrder } from './pagination.js';

const FORMAT = 1;
const MAC_BYTES = 16;
/** Longer than any cursor this server makes (sort values are at most a few hundred characters). */
export const MAX_CURSOR_LENGTH = 2048;

export interface CursorContent {
  sort: string;
  order: SortOrder;
  direction: KeysetDirection;
  after: KeysetPosition;
  /** filtersDigest() of the list the cursor was made for. */
  filters: string;
}

/** Why a cursor was refused; the HTTP layer words it for the client. */
export class CursorRefused extends Error {
  constructor(readonly reason: 'malformed' | 'forged') {
    super(reason === 'malformed' ? 'The cursor is not one this API made' : 'The cursor has been altered');
  }
}

/**
 * A stable digest of what selects a list's rows: the same values in any key order give the same digest;
 * a value left out differs from any value given.
 */
export function filtersDigest(selection: Record<string, unknown>): string {
  return createHash('sha256').update(canonicalJson(selection)).digest('base64url').slice(0, 22);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export class CursorSigner {
  constructor(private readonly key: Buffer) {
    if (key.length < 32) throw new Error('A cursor key needs at least 32 bytes');
  }

  seal(content: CursorContent): string {
    const body = Buffer.from(
      JSON.stringify([
        FORMAT,
        content.sort,
        content.order,
        content.direction,
        content.after.value,
        content.after.id,
        content.filters,
      ]),
    ).toString('base64url');
    return `${body}.${this.mac(body).toString('base64url')}`;
  }

  /** The content of a cursor this key sealed; throws CursorRefused for anything else. */
  open(cursor: string): CursorContent {
    const parts = cursor.length <= MAX_CURSOR_LENGTH ? cursor.split('.') : [];
    const [body, mac] = parts;
    if (parts.length !== 2 || !body || !mac || !isBase64Url(body) || !isBase64Url(mac)) {
      throw new CursorRefused('malformed');
    }
    const given = Buffer.from(mac, 'base64url');
    // Re-encoding catches a MAC whose last character carries stray bits (base64url decoding ignores them).
    if (given.length !== MAC_BYTES || given.toString('base64url') !== mac) throw new CursorRefused('forged');
    if (!timingSafeEqual(given, this.mac(body))) throw new CursorRefused('forged');
    return parseContent(Buffer.from(body, 'base64url').toString('utf8'));
  }

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest().subarray(0, MAC_BYTES);
  }
}

function isBase64Url(text: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(text);
}

/** Signed content is ours, but a key shared with an older build could have sealed another format. */
function parseContent(json: string): CursorContent {
  let fields: unknown;
  try {
    fields = JSON.parse(json);
  } catch {
    throw new CursorRefused('malformed');
  }
  if (!Array.isArray(fields) || fields.length !== 7 || fields[0] !== FORMAT)
    throw new CursorRefused('malformed');
  const [, sort, order, direction, value, id, filters] = fields as unknown[];
  const valueOk =
    value === null || typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
  if (
    typeof sort !== 'string' ||
    (order !== 'asc' && order !== 'desc') ||
    (direction !== 'next' && direction !== 'prev') ||
    !valueOk ||
    typeof id !== 'string' ||
    typeof filters !== 'string'
  ) {
    throw new CursorRefused('malformed');
  }
  return { sort, order, direction, after: { value: value as KeysetPosition['value'], id }, filters };
}
