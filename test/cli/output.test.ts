/**
 * Output as users and scripts see it: `--all` following every page of 250 firewall rules, -o json
 * (the data exactly) and yaml, wide and --no-headers tables, the page note on stderr; and on a terminal
 * (a pseudo-terminal from util-linux `script`): colour unless NO_COLOR or --no-color, and tables fitted to
 * the terminal's width.
 */
import { execFile } from 'node:child_process';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import YAML from 'yaml';
import { BIN, type Cli, cliFor, ensureBuilt } from '../helpers/cli.js';
import { account } from '../helpers/common.js';
import { serverForSuite } from '../helpers/server.js';

// Each test runs bin/nimbus several times (about a second each, far more on a loaded machine).
vi.setConfig({ testTimeout: 180_000 });

const RULES = 250;
const ESC = '\u001b[';

/** Runs `nimbus …args` on a pseudo-terminal `columns` wide; returns what the terminal showed. */
function onTerminal(
  cli: Cli,
  columns: number,
  args: string[],
  env: Record<string, string> = {},
): Promise<string> {
  const quoted = args.map((arg) => `'${arg}'`).join(' ');
  // A person's terminal: without CI, which makes Node's styleText judge the terminal colourless.
  const merged: Record<string, string> = { ...cli.env, SHELL: '/bin/sh', ...env };
  const { CI: _ci, ...terminalEnv } = merged;
  const command = `stty cols ${columns} rows 50; '${process.execPath}' '${BIN}' ${quoted}`;
  return new Promise((resolve, reject) => {
    execFile(
      'script',
      ['-qefc', command, '/dev/null'],
      { env: terminalEnv, timeout: 30_000 },
      (error, stdout) => (error ? reject(error) : resolve(stdout.replace(/\r\n/g, '\n'))),
    );
  });
}

describe('nimbus output', () => {
  const server = serverForSuite();
  let cli: Cli;
  let ids: string[];

  beforeAll(async () => {
    ensureBuilt();
    const { key } = await account(server);
    cli = cliFor(server, key);
    ids = [];
    // 250 rules, ten at a time, with names long enough that a narrow terminal must shorten them.
    for (let batch = 0; batch < RULES / 10; batch++) {
      const replies = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          server.request('POST', '/v1/firewall/rules', {
            key,
            body: {
              name: `allow-service-port-from-the-office-network-${batch * 10 + i}`,
              direction: 'inbound',
              action: 'allow',
              protocol: 'tcp',
              ports: String(1000 + batch * 10 + i),
              sources: ['198.51.100.0/24'],
              region: 'us-east-1',
            },
          }),
        ),
      );
      for (const reply of replies) {
        expect(reply.status, reply.text).toBe(201);
        ids.push(reply.body.data.id);
      }
    }
  }, 180_000);

  it('--all follows every page: JSON is the data of all 250, each once', async () => {
    const all = await cli.json<any[]>('firewall', 'list', '--all');
    expect(all).toHaveLength(RULES);
    expect(new Set(all.map((rule) => rule.id))).toEqual(new Set(ids));
    // The data exactly as the API has it: what GET …/{id} answers for one of them.
    const one = await server.request('GET', `/v1/firewall/rules/${all[7].id}`, {
      key: cli.env.NIMBUS_API_KEY!,
    });
    expect(all[7]).toEqual(one.body.data);
  });

  it('--all in a table: 250 rows; --no-headers drops the header line', async () => {
    const table = await cli.run('firewall', 'list', '--all');
    expect(table.stdout.trimEnd().split('\n')).toHaveLength(RULES + 1);
    expect(table.stderr).toBe('');
    const bare = await cli.run('firewall', 'list', '--all', '--no-headers');
    const lines = bare.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(RULES);
    expect(lines.every((line) => /^fwr_\w+\s/.test(line))).toBe(true);
    // Not a terminal: nothing is shortened and nothing is coloured.
    expect(bare.stdout).toContain('allow-service-port-from-the-office-network-');
    expect(bare.stdout).not.toContain('…');
    expect(bare.stdout).not.toContain(ESC);
  });

  it('one page by default, with a note on stderr; --page and --limit choose another', async () => {
    const first = await cli.run('firewall', 'list');
    expect(first.stdout.trimEnd().split('\n')).toHaveLength(21);
    expect(first.stderr).toBe(`Page 1 of 13 (${RULES} items): --page 2 for the next, --all for all\n`);
    const last = await cli.json<any[]>('firewall', 'list', '--page', '13');
    expect(last).toHaveLength(10);
    expect(await cli.json<any[]>('firewall', 'list', '--limit', '100', '--page', '3')).toHaveLength(50);
    // JSON output is for programs: no page note mixed into stderr.
    expect((await cli.run('firewall', 'list', '-o', 'json')).stderr).toBe('');
  });

  it('-o yaml is the same data; -o wide adds columns', async () => {
    const yaml = await cli.run('firewall', 'list', '--all', '-o', 'yaml');
    const parsed = YAML.parse(yaml.stdout) as any[];
    expect(parsed).toHaveLength(RULES);
    expect(parsed).toEqual(await cli.json('firewall', 'list', '--all'));
    const narrow = (await cli.run('firewall', 'list', '--limit', '1')).stdout.split('\n')[0]!;
    const wide = (await cli.run('firewall', 'list', '--limit', '1', '-o', 'wide')).stdout.split('\n')[0]!;
    expect(narrow.split(/\s{2,}/)).toEqual([
      'ID',
      'NAME',
      'DIRECTION',
      'ACTION',
      'PROTOCOL',
      'PORTS',
      'FROM/TO',
      'PRIORITY',
    ]);
    expect(wide.split(/\s{2,}/)).toEqual([
      ...narrow.split(/\s{2,}/),
      'REGION',
      'ENABLED',
      'TARGETS',
      'DESCRIPTION',
    ]);
  });

  it('on a terminal: a bold header, rows fitted to its width; NO_COLOR and --no-color turn colour off', async () => {
    const shown = await onTerminal(cli, 120, ['firewall', 'list', '--limit', '5']);
    expect(shown).toContain(`${ESC}1mID`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what is removed
    const visible = (line: string) => line.replace(/\u001b\[[0-9;]*m/g, '');
    // The terminal shows stderr too: the page note comes after the table.
    const rows = shown
      .trimEnd()
      .split('\n')
      .filter((line) => !visible(line).startsWith('Page '));
    expect(rows).toHaveLength(6);
    for (const row of rows) expect(visible(row).length).toBeLessThanOrEqual(120);
    // The long names gave way; the ids and the short columns kept every character.
    expect(shown).toMatch(
      /^fwr_\w{26}\s+allow-serv\S*…\s+inbound\s+allow\s+tcp\s+\d+\s+198\.51\.100\.0\/24\s+1000$/m,
    );
    // A narrow terminal shortens more, never past its width.
    const narrow = (await onTerminal(cli, 60, ['firewall', 'list', '--limit', '5'])).trimEnd().split('\n');
    for (const row of narrow.filter((line) => !line.startsWith('Page '))) {
      expect(visible(row).length).toBeLessThanOrEqual(60);
    }

    const plain = await onTerminal(cli, 100, ['firewall', 'list', '--limit', '5'], { NO_COLOR: '1' });
    expect(plain).not.toContain(ESC);
    expect(await onTerminal(cli, 100, ['firewall', 'list', '--limit', '5', '--no-color'])).not.toContain(ESC);
    // A wide terminal shows the names whole.
    expect(await onTerminal(cli, 250, ['firewall', 'list', '--limit', '5'])).not.toContain('…');
  });
});
