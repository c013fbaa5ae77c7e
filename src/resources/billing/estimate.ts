/**
 * Estimates: what a plan would cost, priced by the same rules as metering (resources/billing/rules.ts), before any
 * of it is bought. A plan is a list of items; each names an instance type (optional), how many, for how
 * many hours, in which region, and the storage and VPNs beside it.
 */

import { InvalidRequest } from '../../platform/errors.js';
import { INSTANCE_TYPES, type InstanceType, REGION_NAMES, regionsOffering } from '../catalog/catalog.js';
import { type EstimateLine, estimateLines, sumAmounts } from './rules.js';

export interface EstimateItemRequest {
  instance_type?: string | undefined;
  count?: number | undefined;
  hours?: number | undefined;
  region?: string | undefined;
  volume_gb?: number | undefined;
  snapshot_gb?: number | undefined;
  vpn_count?: number | undefined;
  public_ip_count?: number | undefined;
  transfer_gb?: number | undefined;
}

export interface EstimatedItem {
  request: Required<Omit<EstimateItemRequest, 'instance_type' | 'region'>> & {
    instance_type: string | null;
    region: string | null;
  };
  lines: EstimateLine[];
  subtotal: bigint;
}

export const DEFAULT_ESTIMATE_HOURS = 730;

const TYPES = new Map(INSTANCE_TYPES.map((type) => [type.name, type]));

/** Prices one item; `field` prefixes the names in errors (`items.2.region`, as schema errors name them). */
export function estimateItem(item: EstimateItemRequest, field = ''): EstimatedItem {
  let type: InstanceType | undefined;
  if (item.instance_type !== undefined) {
    type = TYPES.get(item.instance_type);
    if (!type) {
      throw new InvalidRequest(`Unknown instance type ${item.instance_type}`, {
        field: `${field}instance_type`,
        value: item.instance_type,
        allowed_values: [...TYPES.keys()],
      });
    }
  }
  if (item.region !== undefined) {
    if (!REGION_NAMES.includes(item.region)) {
      throw new InvalidRequest(`Unknown region ${item.region}`, {
        field: `${field}region`,
        value: item.region,
        allowed_values: [...REGION_NAMES],
      });
    }
    if (type && !regionsOffering(type).includes(item.region)) {
      throw new InvalidRequest(`${type.name} is not offered in ${item.region}`, {
        field: `${field}region`,
        value: item.region,
        allowed_values: regionsOffering(type),
      });
    }
  }
  const request = {
    instance_type: type?.name ?? null,
    count: item.count ?? (type ? 1 : 0),
    hours: item.hours ?? DEFAULT_ESTIMATE_HOURS,
    region: item.region ?? null,
    volume_gb: item.volume_gb ?? 0,
    snapshot_gb: item.snapshot_gb ?? 0,
    vpn_count: item.vpn_count ?? 0,
    public_ip_count: item.public_ip_count ?? 0,
    transfer_gb: item.transfer_gb ?? 0,
  };
  if (request.count > 0 && !type) {
    throw new InvalidRequest('count needs an instance_type', {
      field: `${field}instance_type`,
      value: null,
      allowed_values: [...TYPES.keys()],
    });
  }
  const lines = estimateLines({ ...request, instance_type: type });
  if (lines.length === 0) {
    throw new InvalidRequest(
      'Nothing to estimate: give an instance_type, volume_gb, snapshot_gb, vpn_count, public_ip_count or transfer_gb',
      { field: `${field}instance_type`, value: null, allowed_values: [...TYPES.keys()] },
    );
  }
  return { request, lines, subtotal: sumAmounts(lines) };
}

/** A cart: every item priced, and the sum. */
export function estimatePlan(items: readonly EstimateItemRequest[]): {
  items: EstimatedItem[];
  total: bigint;
} {
  const priced = items.map((item, index) => estimateItem(item, `items.${index}.`));
  return { items: priced, total: priced.reduce((sum, item) => sum + item.subtotal, 0n) };
}
