/** `nimbus catalog …`: the instance types, regions and images a create may name. */
import { Command } from 'commander';
import type { Column } from '../output.js';
import { listCommand } from './resource-commands.js';
import { addCommands, example } from './shared.js';

const TYPE_COLUMNS: Column[] = [
  { header: 'NAME', value: (t) => t.name },
  { header: 'FAMILY', value: (t) => t.family },
  { header: 'VCPUS', value: (t) => t.vcpus },
  { header: 'MEMORY GB', value: (t) => t.memory_gb },
  { header: 'STORAGE GB', value: (t) => t.storage_gb },
  {
    header: 'GPU',
    value: (t) =>
      t.gpu ? `${(t.gpu as { count: number }).count}x ${(t.gpu as { model: string }).model}` : null,
  },
  { header: 'USD/HOUR', value: (t) => t.price_per_hour },
  { header: 'IOPS', value: (t) => t.iops, wide: true },
  { header: 'REGIONS', value: (t) => t.regions, wide: true },
];
const REGION_COLUMNS: Column[] = [
  { header: 'NAME', value: (r) => r.name },
  { header: 'DESCRIPTION', value: (r) => r.description },
  { header: 'GPUS', value: (r) => (r.gpu_available ? 'yes' : 'no') },
];
const IMAGE_COLUMNS: Column[] = [
  { header: 'NAME', value: (i) => i.name },
  { header: 'DESCRIPTION', value: (i) => i.description },
  { header: 'GPU', value: (i) => (i.gpu_compatible ? 'yes' : 'no') },
  { header: 'DISTRIBUTION', value: (i) => i.distribution, wide: true },
  { header: 'VERSION', value: (i) => i.version, wide: true },
];
const REGIONS = ['us-east-1', 'us-west-2', 'eu-central-1', 'ap-northeast-1'];

export function catalogCommand(): Command {
  const group = new Command('catalog').description('instance types, regions and images');
  example(group, 'nimbus catalog types --family gpu', 'nimbus catalog regions');

  const types = listCommand({
    name: 'types',
    description: 'instance types with their size and price',
    filters: {
      family: ['--family <family>', 'only this family', ['compute', 'memory', 'storage', 'gpu']],
      region: ['--region <region>', 'only types offered in this region', REGIONS],
    },
    sorts: ['name', 'price_per_hour', 'vcpus', 'memory_gb'],
    examples: [
      'nimbus catalog types --all',
      'nimbus catalog types --family gpu --sort price_per_hour --order asc',
    ],
    columns: TYPE_COLUMNS,
    path: '/v1/instance-types',
  });

  const regions = listCommand({
    name: 'regions',
    description: 'regions',
    sorts: ['name'],
    examples: ['nimbus catalog regions'],
    columns: REGION_COLUMNS,
    path: '/v1/regions',
  });

  const images = listCommand({
    name: 'images',
    description: 'OS images',
    sorts: ['name'],
    examples: ['nimbus catalog images -o wide'],
    columns: IMAGE_COLUMNS,
    path: '/v1/images',
  });

  return addCommands(group, types, regions, images);
}
