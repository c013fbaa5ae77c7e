/** Money is integer micro-USD inside Nimbus; the API shows USD numbers. */
export const MICROS_PER_USD = 1_000_000;

export function microsToUsd(micros: number, decimals = 6): number {
  const factor = 10 ** decimals;
  return Math.round((micros / MICROS_PER_USD) * factor) / factor;
}
