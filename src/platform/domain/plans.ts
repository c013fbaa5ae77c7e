/** Plans fix an account's default rate limits and quotas (docs/design.md, "Quotas and plans"). */

export const PLANS = ['free', 'professional', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export const ACCOUNT_STATUSES = ['active', 'past_due', 'suspended'] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];

export interface RateLimitPolicy {
  perHour: number;
  burst: number;
}

export const PLAN_RATE_LIMITS: Record<Plan, RateLimitPolicy> = {
  free: { perHour: 1_000, burst: 50 },
  professional: { perHour: 10_000, burst: 200 },
  enterprise: { perHour: 100_000, burst: 1_000 },
};

export const QUOTA_NAMES = [
  'instances',
  'vcpus',
  'gpus',
  'volumes',
  'volume_storage_gb',
  'snapshots',
  'firewall_rules',
  'vpns',
  'public_ips',
  'api_keys',
  'webhooks',
  'alerts',
] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

export const PLAN_QUOTAS: Record<Plan, Record<QuotaName, number>> = {
  free: {
    instances: 5,
    vcpus: 16,
    gpus: 0,
    volumes: 10,
    volume_storage_gb: 1_000,
    snapshots: 20,
    firewall_rules: 50,
    vpns: 1,
    public_ips: 2,
    api_keys: 10,
    webhooks: 5,
    alerts: 10,
  },
  professional: {
    instances: 50,
    vcpus: 256,
    gpus: 8,
    volumes: 100,
    volume_storage_gb: 20_000,
    snapshots: 500,
    firewall_rules: 500,
    vpns: 10,
    public_ips: 20,
    api_keys: 50,
    webhooks: 25,
    alerts: 100,
  },
  enterprise: {
    instances: 500,
    vcpus: 4_096,
    gpus: 64,
    volumes: 1_000,
    volume_storage_gb: 200_000,
    snapshots: 5_000,
    firewall_rules: 5_000,
    vpns: 100,
    public_ips: 200,
    api_keys: 200,
    webhooks: 100,
    alerts: 1_000,
  },
};
