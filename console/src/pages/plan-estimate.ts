/**
 * The Billing page's plan calculator apart from its markup: the lines as the form holds them (numbers as
 * typed) and the POST /v1/billing/estimate body they make, one item per line in the same order, so the
 * answer's items[i] prices line i.
 */
import type { paths } from '../../../sdk/src/generated/v1.ts';

export type PlanBody = paths['/v1/billing/estimate']['post']['requestBody']['content']['application/json'];
type PlanItem = PlanBody['items'][number];

export interface PlanLine {
  /** Keeps a line's inputs its own when an earlier line is removed. */
  key: number;
  /** Empty: no instances on this line (storage or VPNs only). */
  instanceType: string;
  count: string;
  /** Empty: any region. */
  region: string;
  hours: string;
  volumeGb: string;
  snapshotGb: string;
  vpnCount: string;
}

export function newLine(key: number): PlanLine {
  return {
    key,
    instanceType: 'compute-2x',
    count: '1',
    region: '',
    hours: '730',
    volumeGb: '0',
    snapshotGb: '0',
    vpnCount: '0',
  };
}

export function planItem(line: PlanLine): PlanItem {
  return {
    ...(line.instanceType
      ? { instance_type: line.instanceType as PlanItem['instance_type'], count: Number(line.count) }
      : {}),
    ...(line.region ? { region: line.region as PlanItem['region'] } : {}),
    hours: Number(line.hours),
    volume_gb: Number(line.volumeGb),
    snapshot_gb: Number(line.snapshotGb),
    vpn_count: Number(line.vpnCount),
  };
}

export function planBody(lines: readonly PlanLine[]): PlanBody {
  return { items: lines.map(planItem) };
}

/** A line in a few words for the per-line figures (`3 × compute-2x in eu-central-1, 100 GB volumes`). */
export function lineSummary(line: PlanLine): string {
  const parts = [
    line.instanceType ? `${line.count} × ${line.instanceType}${line.region ? ` in ${line.region}` : ''}` : '',
    Number(line.volumeGb) > 0 ? `${line.volumeGb} GB volumes` : '',
    Number(line.snapshotGb) > 0 ? `${line.snapshotGb} GB snapshots` : '',
    Number(line.vpnCount) > 0 ? `${line.vpnCount} VPN gateway${line.vpnCount === '1' ? '' : 's'}` : '',
  ].filter(Boolean);
  return `${parts.join(', ') || 'nothing'} for ${line.hours} h`;
}
