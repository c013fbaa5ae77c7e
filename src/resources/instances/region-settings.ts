/**
 * The settings whose regions are the catalogue's: NIMBUS_GPU_CAPACITY (the GPUs each region can hand out)
 * and NIMBUS_PUBLIC_IP_POOLS (each region's public IPv4 pool, which VPN endpoints share). The
 * configuration keeps their text (platform/config.ts); they are read here, at start, and refused with a
 * ConfigError like the rest of the configuration.
 */
import { type Config, ConfigError } from '../../platform/config.js';
import { DEFAULT_PUBLIC_POOLS, parseCidr } from '../addresses/addresses.js';
import { REGION_NAMES, REGIONS } from '../catalog/catalog.js';

export interface RegionSettings {
  /** GPUs per region (0 where none). */
  gpuCapacity: Record<string, number>;
  /** Public IPv4 pool (CIDR) per region. */
  publicIpPools: Record<string, string>;
}

export function regionSettings(config: Pick<Config, 'gpuCapacity' | 'publicIpPools'>): RegionSettings {
  return {
    gpuCapacity: parseGpuCapacity(config.gpuCapacity),
    publicIpPools: parsePublicPools(config.publicIpPools),
  };
}

/** `a=1,b=2` → entries, each region checked against the catalogue. */
function regionMap(variable: string, value: string): [string, string][] {
  return value
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const [region, setting] = part.split('=').map((s) => s.trim());
      if (!region || !setting || !REGION_NAMES.includes(region)) {
        throw new ConfigError(
          `Invalid configuration: ${variable} entries are region=value with a region of ${REGION_NAMES.join(', ')} (got "${part}")`,
        );
      }
      return [region, setting];
    });
}

/** Default: 64 GPUs in each region the catalogue offers GPUs in. */
function parseGpuCapacity(value: string | null): Record<string, number> {
  const capacity = Object.fromEntries(REGIONS.map((r) => [r.name, r.gpu_available ? 64 : 0]));
  if (value === null) return capacity;
  for (const region of REGION_NAMES) capacity[region] = 0;
  for (const [region, setting] of regionMap('NIMBUS_GPU_CAPACITY', value)) {
    const count = Number(setting);
    if (!Number.isInteger(count) || count < 0) {
      throw new ConfigError(
        `Invalid configuration: NIMBUS_GPU_CAPACITY for ${region} must be a whole number`,
      );
    }
    capacity[region] = count;
  }
  return capacity;
}

function parsePublicPools(value: string | null): Record<string, string> {
  const pools = { ...DEFAULT_PUBLIC_POOLS };
  for (const [region, cidr] of regionMap('NIMBUS_PUBLIC_IP_POOLS', value ?? '')) {
    try {
      pools[region] = parseCidr(cidr).cidr;
    } catch (error) {
      throw new ConfigError(
        `Invalid configuration: NIMBUS_PUBLIC_IP_POOLS for ${region}: ${(error as Error).message}`,
      );
    }
  }
  return pools;
}
