/**
 * The product catalogue: instance types (the published table of docs/design.md, "Catalogue", verbatim),
 * regions and images. Everything that validates or prices a type reads it from here.
 */

export type InstanceFamily = 'compute' | 'memory' | 'storage' | 'gpu';

export interface InstanceType {
  name: string;
  family: InstanceFamily;
  vcpus: number;
  memory_gb: number;
  storage_gb: number;
  /** Provisioned IOPS, storage-optimized types only. */
  iops: number | null;
  gpu: { count: number; model: string; memory_gb: number } | null;
  /** Price in micro-USD per hour; the API shows USD. */
  price_per_hour_micros: number;
}

const usd = (dollars: number) => Math.round(dollars * 1_000_000);

function type(
  name: string,
  family: InstanceFamily,
  vcpus: number,
  memoryGb: number,
  storageGb: number,
  pricePerHour: number,
  extra: { iops?: number; gpu?: InstanceType['gpu'] } = {},
): InstanceType {
  return {
    name,
    family,
    vcpus,
    memory_gb: memoryGb,
    storage_gb: storageGb,
    iops: extra.iops ?? null,
    gpu: extra.gpu ?? null,
    price_per_hour_micros: usd(pricePerHour),
  };
}

const a100 = (count: number) => ({ count, model: 'A100', memory_gb: 40 });
const h100 = (count: number) => ({ count, model: 'H100', memory_gb: 80 });

export const INSTANCE_TYPES: readonly InstanceType[] = [
  type('compute-1x', 'compute', 1, 2, 25, 0.05),
  type('compute-2x', 'compute', 2, 4, 50, 0.1),
  type('compute-4x', 'compute', 4, 8, 100, 0.2),
  type('compute-8x', 'compute', 8, 16, 200, 0.4),
  type('compute-16x', 'compute', 16, 32, 400, 0.8),
  type('compute-32x', 'compute', 32, 64, 800, 1.6),
  type('memory-2x', 'memory', 2, 16, 50, 0.15),
  type('memory-4x', 'memory', 4, 32, 100, 0.3),
  type('memory-8x', 'memory', 8, 64, 200, 0.6),
  type('memory-16x', 'memory', 16, 128, 400, 1.2),
  type('memory-32x', 'memory', 32, 256, 800, 2.4),
  type('storage-2x', 'storage', 2, 8, 500, 0.2, { iops: 10_000 }),
  type('storage-4x', 'storage', 4, 16, 1000, 0.4, { iops: 20_000 }),
  type('storage-8x', 'storage', 8, 32, 2000, 0.8, { iops: 40_000 }),
  type('storage-16x', 'storage', 16, 64, 4000, 1.6, { iops: 80_000 }),
  type('gpu-1x', 'gpu', 8, 64, 500, 2.5, { gpu: a100(1) }),
  type('gpu-2x', 'gpu', 16, 128, 1000, 5.0, { gpu: a100(2) }),
  type('gpu-4x', 'gpu', 32, 256, 2000, 10.0, { gpu: a100(4) }),
  type('gpu-h100-1x', 'gpu', 8, 128, 1000, 4.0, { gpu: h100(1) }),
  type('gpu-h100-2x', 'gpu', 16, 256, 2000, 8.0, { gpu: h100(2) }),
];

export interface Region {
  name: string;
  description: string;
  gpu_available: boolean;
}

export const REGIONS: readonly Region[] = [
  { name: 'us-east-1', description: 'US East (Virginia)', gpu_available: true },
  { name: 'us-west-2', description: 'US West (Oregon)', gpu_available: true },
  { name: 'eu-central-1', description: 'EU Central (Frankfurt)', gpu_available: false },
  { name: 'ap-northeast-1', description: 'Asia Pacific (Tokyo)', gpu_available: false },
];

export interface Image {
  name: string;
  description: string;
  distribution: string;
  version: string;
  /** Whether GPU instance types may boot this image. */
  gpu_compatible: boolean;
}

export const IMAGES: readonly Image[] = [
  {
    name: 'ubuntu-22.04',
    description: 'Ubuntu 22.04 LTS',
    distribution: 'ubuntu',
    version: '22.04',
    gpu_compatible: true,
  },
  {
    name: 'ubuntu-24.04',
    description: 'Ubuntu 24.04 LTS',
    distribution: 'ubuntu',
    version: '24.04',
    gpu_compatible: true,
  },
  {
    name: 'debian-12',
    description: 'Debian 12 (bookworm)',
    distribution: 'debian',
    version: '12',
    gpu_compatible: false,
  },
  {
    name: 'rocky-9',
    description: 'Rocky Linux 9',
    distribution: 'rocky',
    version: '9',
    gpu_compatible: false,
  },
  {
    name: 'ubuntu-22.04-cuda',
    description: 'Ubuntu 22.04 LTS with NVIDIA drivers and CUDA',
    distribution: 'ubuntu',
    version: '22.04',
    gpu_compatible: true,
  },
];

export const REGION_NAMES = REGIONS.map((r) => r.name);

/** GPU types run only in regions with GPU capacity; every other type runs everywhere. */
export function regionsOffering(instanceType: InstanceType): string[] {
  return REGIONS.filter((r) => instanceType.gpu === null || r.gpu_available).map((r) => r.name);
}

const TYPES_BY_NAME = new Map(INSTANCE_TYPES.map((t) => [t.name, t]));

/** The catalogue entry of a type the store holds (so known to exist); throws for any other name. */
export function instanceTypeNamed(name: string): InstanceType {
  const found = TYPES_BY_NAME.get(name);
  if (!found) throw new Error(`unknown instance type ${name}`);
  return found;
}

/**
 * Prices of what is not an instance type (docs/design.md, "Billing"), in micro-USD. Storage is priced per
 * GB-month, a month being 730 hours; a VPN gateway per hour while it exists (the same figure the VPN
 * record shows as `price_per_hour`).
 */
export const STORAGE_PRICES = {
  /** Root disks of instances (what a stopped instance pays) and data volumes. */
  disk_gb_month_micros: 100_000,
  snapshot_gb_month_micros: 50_000,
} as const;
export const VPN_PRICE_PER_HOUR_MICROS = 50_000;
/** A public IP held but assigned to no instance (issue 32: the order of DigitalOcean's and Hetzner's prices). */
export const PUBLIC_IP_IDLE_PRICE_PER_HOUR_MICROS = 5_000;
/** The hours in a billing month, for GB-month prices and estimates (docs/design.md, "Billing"). */
export const HOURS_PER_MONTH = 730;
