/**
 * The money rules of billing, pure: what a resource pays per second in each state (its meter), how much an
 * interval accrues, how accruals are grouped into line items, and the one rounding, at the invoice total.
 *
 * Exactness. Prices are integer micro-USD per hour (instance types, VPNs) or per GB-month of 730 hours
 * (storage). Per second those are fractions of a micro-dollar, so accruals are counted in a finer integer
 * unit: 1/2,628,000 of a micro-dollar (2,628,000 = the seconds of a 730-hour month). In it every rate per
 * second is a whole number — an hourly price p pays p × 730 units a second, a GB-month price p on g GB
 * pays p × g — so an interval of s seconds accrues rate × s exactly, and any sum of intervals is exact.
 * Amounts are bigint (a month of a large account passes 2^53 units).
 *
 * Seconds. An interval bills the whole seconds between its ends, each end taken down to its second, so two
 * adjacent intervals bill exactly what the interval they split would: cutting time anywhere changes nothing.
 *
 * Rounding happens once: an invoice's (or estimate's) total is its exact sum rounded half-up to the cent.
 * Line items and subtotals are shown to the micro-dollar (6 decimals, half-up) for reading; they are not
 * rounded before they are added.
 */
import {
  HOURS_PER_MONTH,
  type InstanceType,
  PUBLIC_IP_IDLE_PRICE_PER_HOUR_MICROS,
  STORAGE_PRICES,
  VPN_PRICE_PER_HOUR_MICROS,
} from '../catalog/catalog.js';

/**
 * Data transfer sent to public addresses: 0.01 USD per GB (received is free; resources/billing/transfer.ts).
 */
export const DATA_TRANSFER_PRICE_MICROS = 10_000;

/** Seconds in a billing month (730 h): the units of accrual per micro-dollar. */
export const SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600;
export const UNITS_PER_MICRO = BigInt(SECONDS_PER_MONTH);
export const UNITS_PER_USD = UNITS_PER_MICRO * 1_000_000n;

export const RESOURCE_TYPES = ['instance', 'volume', 'snapshot', 'vpn', 'public_ip'] as const;
export type BilledResourceType = (typeof RESOURCE_TYPES)[number];

/** What is being paid for: an instance's compute while it runs, its root disk otherwise, and so on. */
export const METERS = [
  'instance_compute',
  'instance_storage',
  'volume_storage',
  'snapshot_storage',
  'vpn',
  'public_ip_idle',
  // Bytes, not seconds (resources/billing/transfer.ts): sent to public addresses, and received (free).
  'data_transfer',
  'data_transfer_in',
] as const;
export type MeterName = (typeof METERS)[number];

export type BillingUnit = 'hour' | 'GB-month' | 'GB';

/** The billable state of a resource at one moment: one price running per second, or none. */
export interface Meter {
  account_id: string;
  resource_id: string;
  resource_type: BilledResourceType;
  resource_name: string;
  meter: MeterName;
  region: string;
  /** Instances: the type whose price or root disk is paid. */
  instance_type: string | null;
  /** Storage meters: the GB paid for; null for hourly meters. */
  size_gb: number | null;
  unit: BillingUnit;
  /** Micro-USD per hour or per GB-month. */
  unit_price_micros: number;
}

/**
 * Two meters bill the same when this is equal: a rename does not start a new interval, a resize or a
 * status that changes the price does.
 */
export function meterKey(meter: Meter | null): string {
  if (meter === null) return '';
  return `${meter.meter}|${meter.instance_type ?? ''}|${meter.size_gb ?? ''}|${meter.unit_price_micros}`;
}

/** Accrual units per second of a meter (see the module comment: always a whole number). */
export function ratePerSecond(meter: Pick<Meter, 'unit' | 'unit_price_micros' | 'size_gb'>): bigint {
  return meter.unit === 'hour'
    ? BigInt(meter.unit_price_micros) * BigInt(HOURS_PER_MONTH)
    : BigInt(meter.unit_price_micros) * BigInt(meter.size_gb ?? 0);
}

/** Whole seconds billed between two instants (each taken down to its second); 0 when end ≤ start. */
export function billedSeconds(startMs: number, endMs: number): number {
  return Math.max(0, epochSecond(endMs) - epochSecond(startMs));
}

export const epochSecond = (ms: number) => Math.floor(ms / 1000);

/** What `seconds` of a meter accrue, in units of 1/2,628,000 micro-USD. */
export function accrue(
  meter: Pick<Meter, 'unit' | 'unit_price_micros' | 'size_gb'>,
  seconds: number,
): bigint {
  return ratePerSecond(meter) * BigInt(seconds);
}

// ——— The meters of each kind of resource (which states pay what) ———

type InstanceLike = {
  id: string;
  account_id: string;
  name: string;
  status: string;
  instance_type: string;
  region: string;
};

/**
 * A running instance pays its type's hourly price; in any other status in which its root disk exists
 * (starting, stopping, stopped, error) it pays that disk as storage; once it is being deleted, nothing.
 */
export function instanceMeter(instance: InstanceLike, type: InstanceType): Meter | null {
  if (instance.status === 'deleting') return null;
  const base = {
    account_id: instance.account_id,
    resource_id: instance.id,
    resource_type: 'instance' as const,
    resource_name: instance.name,
    region: instance.region,
    instance_type: instance.instance_type,
  };
  if (instance.status === 'running') {
    return {
      ...base,
      meter: 'instance_compute',
      size_gb: null,
      unit: 'hour',
      unit_price_micros: type.price_per_hour_micros,
    };
  }
  return {
    ...base,
    meter: 'instance_storage',
    size_gb: type.storage_gb,
    unit: 'GB-month',
    unit_price_micros: STORAGE_PRICES.disk_gb_month_micros,
  };
}

type VolumeLike = {
  id: string;
  account_id: string;
  name: string;
  status: string;
  kind: string;
  size_gb: number;
  region: string;
};

/**
 * A data volume pays its size from the request that creates it until the one that deletes it (or until it
 * fails); a root volume is paid by its instance.
 */
export function volumeMeter(volume: VolumeLike): Meter | null {
  if (volume.kind === 'root' || volume.status === 'deleting' || volume.status === 'error') return null;
  return {
    account_id: volume.account_id,
    resource_id: volume.id,
    resource_type: 'volume',
    resource_name: volume.name,
    meter: 'volume_storage',
    region: volume.region,
    instance_type: null,
    size_gb: volume.size_gb,
    unit: 'GB-month',
    unit_price_micros: STORAGE_PRICES.disk_gb_month_micros,
  };
}

type SnapshotLike = {
  id: string;
  account_id: string;
  name: string;
  status: string;
  size_gb: number;
  region: string;
};

/** A snapshot pays from when it completes until its delete is asked for; a failed one never pays. */
export function snapshotMeter(snapshot: SnapshotLike): Meter | null {
  if (snapshot.status !== 'available') return null;
  return {
    account_id: snapshot.account_id,
    resource_id: snapshot.id,
    resource_type: 'snapshot',
    resource_name: snapshot.name,
    meter: 'snapshot_storage',
    region: snapshot.region,
    instance_type: null,
    size_gb: snapshot.size_gb,
    unit: 'GB-month',
    unit_price_micros: STORAGE_PRICES.snapshot_gb_month_micros,
  };
}

type VpnLike = { id: string; account_id: string; name: string; status: string; region: string };

/** A VPN pays its hourly price from its create request until its delete request (or until it fails). */
export function vpnMeter(vpn: VpnLike): Meter | null {
  if (vpn.status === 'deleting' || vpn.status === 'error') return null;
  return {
    account_id: vpn.account_id,
    resource_id: vpn.id,
    resource_type: 'vpn',
    resource_name: vpn.name,
    meter: 'vpn',
    region: vpn.region,
    instance_type: null,
    size_gb: null,
    unit: 'hour',
    unit_price_micros: VPN_PRICE_PER_HOUR_MICROS,
  };
}

type PublicIpLike = {
  id: string;
  account_id: string;
  name: string;
  region: string;
  instance_id: string | null;
};

/** A public IP pays while it is held and assigned to no instance (an assigned one is part of its instance). */
export function publicIpMeter(ip: PublicIpLike): Meter | null {
  if (ip.instance_id !== null) return null;
  return {
    account_id: ip.account_id,
    resource_id: ip.id,
    resource_type: 'public_ip',
    resource_name: ip.name,
    meter: 'public_ip_idle',
    region: ip.region,
    instance_type: null,
    size_gb: null,
    unit: 'hour',
    unit_price_micros: PUBLIC_IP_IDLE_PRICE_PER_HOUR_MICROS,
  };
}

// ——— Usage: pieces of metered time, grouped into line items ———

/** Seconds of one meter of one resource (within one day when grouping by day). */
export interface UsagePiece {
  resource_id: string;
  resource_type: BilledResourceType;
  resource_name: string;
  meter: MeterName;
  instance_type: string | null;
  size_gb: number | null;
  unit: BillingUnit;
  unit_price_micros: number;
  seconds: number;
  /** `YYYY-MM-DD` (UTC) when grouped by day. */
  day?: string;
  /** Quantity meters (unit `GB`): the bytes, in place of seconds (which are then 0). */
  bytes?: number;
}

export const GROUP_BYS = ['resource', 'resource_type', 'instance_type', 'day'] as const;
export type GroupBy = (typeof GROUP_BYS)[number];

export interface LineItem {
  /** Set when the line is about one resource (group_by=resource). */
  resource_id: string | null;
  resource_type: BilledResourceType;
  meter: MeterName;
  description: string;
  instance_type: string | null;
  day: string | null;
  unit: BillingUnit;
  /** Hours, or GB-months, exact as a fraction: numerator over QUANTITY_DENOMINATOR[unit]. */
  quantity_numerator: bigint;
  /** Micro-USD per unit; null when the line adds up several prices (grouped by resource type or day). */
  unit_price_micros: number | null;
  amount: bigint;
}

/**
 * A GB of data transfer: 2^30 bytes, the GB of disks everywhere else (a `size_gb` disk is that many GiB;
 * drivers/qemu/disks.ts).
 */
export const BYTES_PER_GB = 1024n ** 3n;

/** Hours are seconds / 3600; GB-months are GB-seconds / 2,628,000; GB are bytes / 2^30. */
export const QUANTITY_DENOMINATOR: Record<BillingUnit, bigint> = {
  hour: 3600n,
  'GB-month': UNITS_PER_MICRO,
  GB: BYTES_PER_GB,
};

const METER_WORDS: Record<MeterName, string> = {
  instance_compute: 'running',
  instance_storage: 'root disk while not running',
  volume_storage: 'volume storage',
  snapshot_storage: 'snapshot storage',
  vpn: 'VPN gateway',
  data_transfer: 'data sent to public addresses',
  data_transfer_in: 'data received from public addresses (free)',
  public_ip_idle: 'public IP held unassigned',
};

function groupKey(piece: UsagePiece, by: GroupBy): string {
  switch (by) {
    case 'resource':
      return `${piece.resource_id}|${piece.meter}|${piece.instance_type ?? ''}|${piece.size_gb ?? ''}|${piece.unit_price_micros}`;
    case 'resource_type':
      return `${piece.resource_type}|${piece.meter}`;
    case 'instance_type':
      // Data transfer is priced alike whatever the type: one line per meter, not per type.
      return piece.resource_type === 'instance' && piece.unit !== 'GB'
        ? `${piece.instance_type}|${piece.meter}`
        : `${piece.resource_type}|${piece.meter}`;
    case 'day':
      return `${piece.day}|${piece.resource_type}|${piece.meter}`;
  }
}

function describe(piece: UsagePiece, by: GroupBy): string {
  const words = METER_WORDS[piece.meter];
  switch (by) {
    case 'resource': {
      const label = `${capitalised(piece.resource_type)} ${piece.resource_name} (${piece.resource_id})`;
      if (piece.meter === 'instance_compute') return `${label}: ${piece.instance_type}, ${words}`;
      if (piece.meter === 'instance_storage')
        return `${label}: ${piece.instance_type} ${words}, ${piece.size_gb} GB`;
      if (piece.unit === 'GB' || (piece.unit === 'hour' && piece.instance_type === null))
        return `${label}: ${words}`;
      return `${label}: ${words}, ${piece.size_gb} GB`;
    }
    case 'instance_type':
      if (piece.resource_type === 'instance' && piece.unit !== 'GB')
        return `Instances ${piece.instance_type}: ${words}`;
      return `${capitalised(piece.resource_type)}s: ${words}`;
    case 'resource_type':
      return `${capitalised(piece.resource_type)}s: ${words}`;
    case 'day':
      return `${piece.day} ${capitalised(piece.resource_type)}s: ${words}`;
  }
}

const CAPITALISED: Partial<Record<BilledResourceType, string>> = { vpn: 'VPN', public_ip: 'Public IP' };
const capitalised = (word: BilledResourceType) =>
  CAPITALISED[word] ?? word.charAt(0).toUpperCase() + word.slice(1);

/** How much one piece is of its unit: seconds, GB-seconds or bytes (see QUANTITY_DENOMINATOR). */
function quantityNumerator(piece: UsagePiece): bigint {
  if (piece.unit === 'GB') return BigInt(piece.bytes ?? 0);
  return piece.unit === 'hour' ? BigInt(piece.seconds) : BigInt(piece.seconds) * BigInt(piece.size_gb ?? 0);
}

/**
 * What bytes of a per-GB price accrue: bytes × price / 2^30 micro-dollars, in accrual units, rounded
 * half-up to the unit (1/2,628,000 of a micro-dollar — a byte is not a whole number of them). The only
 * rounding before an invoice's total, and far below what a total shows.
 */
export function accrueBytes(bytes: bigint, unitPriceMicros: number): bigint {
  return roundHalfUp(bytes * BigInt(unitPriceMicros) * UNITS_PER_MICRO, BYTES_PER_GB);
}

/** What a piece accrues: its seconds at its rate, or its bytes at its per-GB price. */
export function pieceAmount(piece: UsagePiece): bigint {
  return piece.unit === 'GB'
    ? accrueBytes(BigInt(piece.bytes ?? 0), piece.unit_price_micros)
    : accrue(piece, piece.seconds);
}

/**
 * Groups pieces into line items, exactly: each line's amount is the sum of its pieces' accruals; lines with
 * nothing to bill (0 seconds, 0 bytes) are left out. Lines are ordered by day, then resource type (instances,
 * volumes, snapshots, VPNs), resource id (ids sort by creation time) and meter; otherwise as they first
 * appear (an instance's types in the order it had them).
 */
export function groupUsage(pieces: readonly UsagePiece[], by: GroupBy): LineItem[] {
  const lines = new Map<string, LineItem>();
  for (const piece of pieces) {
    if (piece.unit === 'GB' ? (piece.bytes ?? 0) <= 0 : piece.seconds <= 0) continue;
    const key = groupKey(piece, by);
    const amount = pieceAmount(piece);
    const line = lines.get(key);
    if (line) {
      line.amount += amount;
      line.quantity_numerator += quantityNumerator(piece);
      if (line.unit_price_micros !== piece.unit_price_micros) line.unit_price_micros = null;
      continue;
    }
    lines.set(key, {
      resource_id: by === 'resource' ? piece.resource_id : null,
      resource_type: piece.resource_type,
      meter: piece.meter,
      description: describe(piece, by),
      instance_type: by === 'resource' || by === 'instance_type' ? piece.instance_type : null,
      day: by === 'day' ? (piece.day ?? null) : null,
      unit: piece.unit,
      quantity_numerator: quantityNumerator(piece),
      unit_price_micros: piece.unit_price_micros,
      amount,
    });
  }
  return [...lines.values()].sort(lineOrder);
}

function lineOrder(a: LineItem, b: LineItem): number {
  return (
    compareText(a.day ?? '', b.day ?? '') ||
    RESOURCE_TYPES.indexOf(a.resource_type) - RESOURCE_TYPES.indexOf(b.resource_type) ||
    compareText(a.resource_id ?? '', b.resource_id ?? '') ||
    METERS.indexOf(a.meter) - METERS.indexOf(b.meter)
  );
}

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function sumAmounts(lines: readonly { amount: bigint }[]): bigint {
  let total = 0n;
  for (const line of lines) total += line.amount;
  return total;
}

// ——— Rounding and display ———

/** Rounds a non-negative exact amount half-up to whole multiples of `unitsPerStep` units. */
function roundHalfUp(amount: bigint, unitsPerStep: bigint): bigint {
  return (amount * 2n + unitsPerStep) / (2n * unitsPerStep);
}

/** The one rounding of billing: an exact total to whole cents (half-up). */
export function totalCents(amount: bigint): bigint {
  return roundHalfUp(amount, UNITS_PER_USD / 100n);
}

/** An exact amount shown in USD with 6 decimals (half-up); display only, never added up again. */
export function usdShown(amount: bigint): number {
  return Number(roundHalfUp(amount, UNITS_PER_MICRO)) / 1_000_000;
}

/** Whole cents in USD (a total). */
export const centsToUsd = (cents: bigint): number => Number(cents) / 100;

/** A quantity shown to 6 decimals (half-up). */
export function quantityShown(numerator: bigint, unit: BillingUnit): number {
  return Number(roundHalfUp(numerator * 1_000_000n, QUANTITY_DENOMINATOR[unit])) / 1_000_000;
}

/** An exact amount as text (stored that way: it may pass what a 64-bit integer column holds). */
export const amountText = (amount: bigint): string => amount.toString();
export const amountFromText = (text: string): bigint => BigInt(text);

// ——— Periods: calendar months, UTC ———

export interface Period {
  start: Date;
  end: Date;
}

/** The calendar month (UTC) holding `at`. */
export function monthOf(at: Date): Period {
  const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
  const end = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
  return { start, end };
}

/**
 * The whole seconds of [startS, endS) (epoch seconds) in each calendar month (UTC) it touches, by the
 * epoch second at which the month starts; months with none are left out.
 */
export function monthSpans(startS: number, endS: number): { monthS: number; seconds: number }[] {
  const spans: { monthS: number; seconds: number }[] = [];
  let month = monthOf(new Date(startS * 1000));
  while (month.start.getTime() < endS * 1000) {
    const monthS = month.start.getTime() / 1000;
    const seconds = Math.min(endS, month.end.getTime() / 1000) - Math.max(startS, monthS);
    if (seconds > 0) spans.push({ monthS, seconds });
    month = monthOf(month.end);
  }
  return spans;
}

/** `YYYY-MM` of a period. */
export const periodName = (period: Period): string => period.start.toISOString().slice(0, 7);

export const PERIOD_PATTERN = '^[0-9]{4}-(0[1-9]|1[0-2])$';

/** The period named `YYYY-MM` (the caller has checked the pattern). */
export function periodNamed(name: string): Period {
  const [year, month] = name.split('-').map(Number) as [number, number];
  return monthOf(new Date(Date.UTC(year, month - 1, 1)));
}

const DAY_MS = 86_400_000;

/**
 * Cuts [startMs, endMs) at UTC midnights, giving each day its billed seconds. Since every cut is at a
 * whole second, the days add up to the seconds of the whole interval.
 */
export function secondsPerDay(startMs: number, endMs: number): { day: string; seconds: number }[] {
  const days: { day: string; seconds: number }[] = [];
  let from = startMs;
  while (from < endMs) {
    const dayIndex = Math.floor(from / DAY_MS);
    const to = Math.min(endMs, (dayIndex + 1) * DAY_MS);
    const seconds = billedSeconds(from, to);
    if (seconds > 0) days.push({ day: dayName(dayIndex), seconds });
    from = to;
  }
  return days;
}

const dayNames = new Map<number, string>();

/** `YYYY-MM-DD` of the UTC day with this index since the epoch (formatted once per day). */
function dayName(dayIndex: number): string {
  let name = dayNames.get(dayIndex);
  if (name === undefined) {
    name = new Date(dayIndex * DAY_MS).toISOString().slice(0, 10);
    if (dayNames.size > 10_000) dayNames.clear();
    dayNames.set(dayIndex, name);
  }
  return name;
}

// ——— Estimates ———

export interface EstimateItemInput {
  instance_type?: InstanceType;
  count: number;
  hours: number;
  volume_gb: number;
  snapshot_gb: number;
  vpn_count: number;
  public_ip_count: number;
  /** GB (2^30 bytes) sent to public addresses over the hours. */
  transfer_gb: number;
}

export const ESTIMATE_ITEMS = [
  'instances',
  'volume_storage',
  'snapshot_storage',
  'vpn',
  'public_ip_idle',
  'data_transfer',
] as const;

export interface EstimateLine {
  item: (typeof ESTIMATE_ITEMS)[number];
  description: string;
  quantity_numerator: bigint;
  unit: BillingUnit;
  unit_price_micros: number;
  amount: bigint;
}

/**
 * What a plan costs over `hours` (whole hours), by the same rates as metering: instances running the whole
 * time, volumes and snapshots held the whole time, VPN gateways existing the whole time.
 */
export function estimateLines(input: EstimateItemInput): EstimateLine[] {
  const seconds = input.hours * 3600;
  const lines: EstimateLine[] = [];
  const type = input.instance_type;
  if (type && input.count > 0) {
    const meter = { unit: 'hour', unit_price_micros: type.price_per_hour_micros, size_gb: null } as const;
    lines.push({
      item: 'instances',
      description: `${input.count} × ${type.name} for ${input.hours} h`,
      quantity_numerator: BigInt(seconds) * BigInt(input.count),
      unit: 'hour',
      unit_price_micros: type.price_per_hour_micros,
      amount: accrue(meter, seconds) * BigInt(input.count),
    });
  }
  const storage = (item: 'volume_storage' | 'snapshot_storage', gb: number, price: number, what: string) => {
    if (gb <= 0) return;
    lines.push({
      item,
      description: `${gb} GB of ${what} for ${input.hours} h`,
      quantity_numerator: BigInt(seconds) * BigInt(gb),
      unit: 'GB-month',
      unit_price_micros: price,
      amount: accrue({ unit: 'GB-month', unit_price_micros: price, size_gb: gb }, seconds),
    });
  };
  storage('volume_storage', input.volume_gb, STORAGE_PRICES.disk_gb_month_micros, 'volumes');
  storage('snapshot_storage', input.snapshot_gb, STORAGE_PRICES.snapshot_gb_month_micros, 'snapshots');
  if (input.vpn_count > 0) {
    const meter = { unit: 'hour', unit_price_micros: VPN_PRICE_PER_HOUR_MICROS, size_gb: null } as const;
    lines.push({
      item: 'vpn',
      description: `${input.vpn_count} VPN gateway${input.vpn_count === 1 ? '' : 's'} for ${input.hours} h`,
      quantity_numerator: BigInt(seconds) * BigInt(input.vpn_count),
      unit: 'hour',
      unit_price_micros: VPN_PRICE_PER_HOUR_MICROS,
      amount: accrue(meter, seconds) * BigInt(input.vpn_count),
    });
  }
  if (input.public_ip_count > 0) {
    const price = PUBLIC_IP_IDLE_PRICE_PER_HOUR_MICROS;
    const meter = { unit: 'hour', unit_price_micros: price, size_gb: null } as const;
    lines.push({
      item: 'public_ip_idle',
      description: `${input.public_ip_count} unassigned public IP${input.public_ip_count === 1 ? '' : 's'} for ${input.hours} h`,
      quantity_numerator: BigInt(seconds) * BigInt(input.public_ip_count),
      unit: 'hour',
      unit_price_micros: price,
      amount: accrue(meter, seconds) * BigInt(input.public_ip_count),
    });
  }
  if (input.transfer_gb > 0) {
    const bytes = BigInt(input.transfer_gb) * BYTES_PER_GB;
    lines.push({
      item: 'data_transfer',
      description: `${input.transfer_gb} GB sent to public addresses`,
      quantity_numerator: bytes,
      unit: 'GB',
      unit_price_micros: DATA_TRANSFER_PRICE_MICROS,
      amount: accrueBytes(bytes, DATA_TRANSFER_PRICE_MICROS),
    });
  }
  return lines;
}
