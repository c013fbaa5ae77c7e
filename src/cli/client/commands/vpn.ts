/** `nimbus vpn …`: WireGuard gateways into the account's private network, their peers and client files. */
import { STATE_TABLES } from '@nimbus/sdk';
import { Command } from 'commander';
import { UsageError } from '../exit-codes.js';
import { type Column, printMessage } from '../output.js';
import { withSession } from '../session.js';
import { tableTarget } from '../wait.js';
import { listCommand, resourceCommands } from './resource-commands.js';
import { addCommands, collect, defined, example, printItem, type Region } from './shared.js';
import {
  readPrivateKeyFile,
  wireguardPublicKey,
  withPrivateKey,
  writeSecretFile,
} from './wireguard-files.js';

const COLUMNS: Column[] = [
  { header: 'ID', value: (v) => v.id },
  { header: 'NAME', value: (v) => v.name },
  { header: 'STATUS', value: (v) => v.status },
  { header: 'REGION', value: (v) => v.region },
  { header: 'ENDPOINT', value: (v) => v.endpoint },
  { header: 'TUNNEL', value: (v) => v.tunnel_cidr },
  { header: 'ALLOWED', value: (v) => v.allowed_cidrs, wide: true },
  { header: 'SERVER KEY', value: (v) => v.server_public_key, wide: true },
  { header: 'CREATED', value: (v) => v.created_at, wide: true },
];
const PEER_COLUMNS: Column[] = [
  { header: 'ID', value: (p) => p.id },
  { header: 'NAME', value: (p) => p.name },
  { header: 'ADDRESS', value: (p) => p.address },
  { header: 'PUBLIC KEY', value: (p) => p.public_key },
  { header: 'CREATED', value: (p) => p.created_at, wide: true },
];

function peersCommand(): Command {
  const group = new Command('peers').description("a VPN's peers (the machines that connect to it)");
  example(group, 'nimbus vpn peers add vpn_0123 laptop --private-key-file client.key --config-file wg0.conf');

  const add = new Command('add')
    .description('add a peer and write its wg-quick file')
    .argument('<vpn>', 'VPN id')
    .argument('<name>', 'peer name')
    .option(
      '--private-key-file <file>',
      'your WireGuard private key (wg genkey); only its public key is sent',
    )
    .option(
      '--public-key <key>',
      'the peer’s public key (the file then has a placeholder for the private key)',
    )
    .option('--config-file <file>', 'write the wg-quick file here (mode 0600)');
  example(
    add,
    'umask 077 && wg genkey > client.key && nimbus vpn peers add vpn_0123 laptop --private-key-file client.key --config-file wg0.conf',
    'nimbus vpn peers add vpn_0123 phone --config-file phone.conf   # the server makes the key pair',
  );
  add.action(
    withSession<{ privateKeyFile?: string; publicKey?: string; configFile?: string }>(
      async (session, [vpnId, name], flags) => {
        if (flags.privateKeyFile !== undefined && flags.publicKey !== undefined) {
          throw new UsageError('--private-key-file or --public-key, not both');
        }
        const privateKey =
          flags.privateKeyFile === undefined ? undefined : readPrivateKeyFile(flags.privateKeyFile);
        const publicKey = privateKey === undefined ? flags.publicKey : wireguardPublicKey(privateKey);
        const { data } = await session.nimbus.post('/v1/vpn/{id}/peers', {
          params: { path: { id: vpnId! } },
          body: { name: name!, ...defined({ public_key: publicKey }) },
        });
        // Every added peer comes with its file (the schema marks it optional only for other answers).
        const file = data.config ?? '';
        const config = privateKey === undefined ? file : withPrivateKey(file, privateKey);
        if (flags.configFile !== undefined) {
          writeSecretFile(flags.configFile, config);
          process.stderr.write(
            `Wrote ${flags.configFile}: wg-quick up ./${flags.configFile.split('/').pop()}\n`,
          );
        }
        // The file and any generated private key are not printed to a table: they went to the file.
        const { config: _config, private_key: _key, ...peer } = data;
        printItem(session, session.humanOutput && flags.configFile !== undefined ? peer : data);
      },
    ),
  );

  const list = listCommand({
    description: 'list peers',
    argument: ['<vpn>', 'VPN id'],
    sorts: ['created_at', 'name'],
    examples: ['nimbus vpn peers list vpn_0123'],
    columns: PEER_COLUMNS,
    path: ([vpnId]) => ({ path: '/v1/vpn/{id}/peers', params: { id: vpnId! } }),
  });

  const remove = new Command('remove')
    .alias('rm')
    .description('remove a peer')
    .argument('<vpn>', 'VPN id')
    .argument('<peer>', 'peer id');
  example(remove, 'nimbus vpn peers remove vpn_0123 vpp_0456');
  remove.action(
    withSession(async (session, [vpnId, peerId]) => {
      await session.nimbus.delete('/v1/vpn/{id}/peers/{peer_id}', {
        params: { path: { id: vpnId!, peer_id: peerId! } },
      });
      printMessage(`Removed peer ${peerId}`, session.out);
    }),
  );

  const config = new Command('config')
    .description("a peer's wg-quick file again, with the current routes")
    .argument('<vpn>', 'VPN id')
    .argument('<peer>', 'peer id')
    .option('--private-key-file <file>', 'fill in your private key from this file')
    .option('--config-file <file>', 'write it here (mode 0600) instead of stdout');
  example(
    config,
    'nimbus vpn peers config vpn_0123 vpp_0456 --private-key-file client.key --config-file wg0.conf',
  );
  config.action(
    withSession<{ privateKeyFile?: string; configFile?: string }>(async (session, [vpnId, peerId], flags) => {
      const { data } = await session.nimbus.get('/v1/vpn/{id}/peers/{peer_id}/config', {
        params: { path: { id: vpnId!, peer_id: peerId! } },
      });
      const text =
        flags.privateKeyFile === undefined
          ? data.config
          : withPrivateKey(data.config, readPrivateKeyFile(flags.privateKeyFile));
      if (flags.configFile !== undefined) writeSecretFile(flags.configFile, text);
      else if (session.humanOutput) process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
      else printItem(session, { ...data, config: text });
    }),
  );
  return addCommands(group, add, list, remove, config);
}

export function vpnCommand(): Command {
  const group = new Command('vpn')
    .alias('vpns')
    .description('WireGuard VPN gateways into the private network');
  example(group, 'nimbus vpn create office --region us-east-1 --wait', 'nimbus vpn peers add --help');

  const vpns = resourceCommands({
    path: '/v1/vpn',
    id: { help: 'VPN id', prefix: 'vpn_' },
    columns: COLUMNS,
  });

  const create = vpns.create({
    description: 'create a VPN gateway',
    argument: ['<name>', 'VPN name'],
    options: (command) =>
      command
        .requiredOption('--region <region>', 'region')
        .option(
          '--tunnel-cidr <cidr>',
          'addresses for peers inside the tunnel (default chosen by the server)',
        )
        .option(
          '--allowed-cidr <cidr>',
          'network peers may reach (repeatable; default: the private network)',
          collect,
        ),
    examples: ['nimbus vpn create office --region us-east-1 --wait'],
    body: (flags: { region: string; tunnelCidr?: string; allowedCidr?: string[] }, _session, [name]) => ({
      name: name!,
      region: flags.region as Region,
      ...defined({ tunnel_cidr: flags.tunnelCidr, allowed_cidrs: flags.allowedCidr }),
    }),
    wait: { until: tableTarget('vpn', 'create') },
  });

  const list = vpns.list({
    description: 'list VPNs',
    filters: {
      status: ['--status <status>', 'only this status', [...STATE_TABLES.vpn.statuses]],
      region: ['--region <region>', 'only this region'],
    },
    sorts: ['created_at', 'name'],
    examples: ['nimbus vpn list'],
  });
  const get = vpns.get({ description: 'show one VPN', examples: ['nimbus vpn get vpn_0123'] });
  const update = vpns.update({
    description: 'rename, or change the networks peers may reach',
    options: (command) =>
      command
        .option('--name <name>', 'new name')
        .option('--allowed-cidr <cidr>', 'the networks peers may reach (repeatable; replaces them)', collect),
    examples: ['nimbus vpn update vpn_0123 --allowed-cidr 10.0.0.0/16'],
    body: (flags: { name?: string; allowedCidr?: string[] }) =>
      defined({ name: flags.name, allowed_cidrs: flags.allowedCidr }),
    nothing: 'Nothing to update: give --name or --allowed-cidr',
  });

  const remove = vpns.delete({
    description: 'delete a VPN and its peers',
    example: 'nimbus vpn delete vpn_0123 --wait',
    mode: 'async',
  });

  return addCommands(group, create, list, get, update, remove, peersCommand());
}
