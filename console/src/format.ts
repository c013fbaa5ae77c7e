/** How the console writes dates, money and sizes. */

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function formatPrice(perHour: number): string {
  return `$${perHour.toFixed(perHour < 1 ? 4 : 2)}/h`;
}

export function formatMoney(amount: number): string {
  return `$${amount.toFixed(2)}`;
}

/** `digits`: decimals to show instead of the usual (one below 10 of a unit, none above). */
export function formatBytes(bytes: number, digits?: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(digits ?? (value < 10 && unit > 0 ? 1 : 0))} ${units[unit]}`;
}
