/** `nimbus catalog …`: the instance types, regions and images a create may name. */
import { Command, Option } from 'commander';
import type { Column } from '../output.js';
import { withSession } from '../session.js';
import { example, type ListFlags, listOptions, runList } from './shared.js';

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

  const types = listOptions(
    new Command('types')
      .description('instance types with their size and price')
      .addOption(
        new Option('--family <family>', 'only this family').choices(['compute', 'memory', 'storage', 'gpu']),
      )
      .addOption(new Option('--region <region>', 'only types offered in this region').choices(REGIONS)),
    ['name', 'price_per_hour', 'vcpus', 'memory_gb'],
  );
  example(
    types,
    'nimbus catalog types --all',
    'nimbus catalog types --family gpu --sort price_per_hour --order asc',
  );
  types.action(
    withSession<ListFlags & { family?: string; region?: string }>((session, _args, flags) =>
      runList(
        session,
        '/v1/instance-types',
        { query: { family: flags.family, region: flags.region } },
        TYPE_COLUMNS,
        flags,
      ),
    ),
  );

  const regions = listOptions(new Command('regions').description('regions'), ['name']);
  example(regions, 'nimbus catalog regions');
  regions.action(
    withSession<ListFlags>((session, _args, flags) =>
      runList(session, '/v1/regions', {}, REGION_COLUMNS, flags),
    ),
  );

  const images = listOptions(new Command('images').description('OS images'), ['name']);
  example(images, 'nimbus catalog images -o wide');
  images.action(
    withSession<ListFlags>((session, _args, flags) =>
      runList(session, '/v1/images', {}, IMAGE_COLUMNS, flags),
    ),
  );

  return group.addCommand(types).addCommand(regions).addCommand(images);
}
