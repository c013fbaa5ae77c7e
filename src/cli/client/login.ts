/**
 * `nimbus login`, `logout` and `whoami`. Login asks for the server's URL and an API key (typed without
 * echo), checks the server's certificate first (a self-signed one is shown by its SHA-256 fingerprint and
 * trusted only when the user says so, then pinned), proves the key with GET /v1/account, and only then
 * stores the profile (config-file.ts, mode 0600). Scripts can pass --url, --api-key-stdin and
 * --fingerprint instead of answering.
 */
import { confirm, input, password } from '@inquirer/prompts';
import { DEFAULT_BASE_URL, Nimbus, normalizeFingerprint } from '@nimbus/sdk';
import { Command } from 'commander';
import { probeCertificate, type ServerCertificate } from './certificate.js';
import { example, printItem } from './commands/shared.js';
import { configPath, type Profile, readConfig, writeConfig } from './config-file.js';
import { profileName } from './context.js';
import { NotLoggedInError, UsageError } from './exit-codes.js';
import { printMessage } from './output.js';
import { withSession } from './session.js';

interface LoginFlags {
  url?: string;
  apiKeyStdin?: boolean;
  fingerprint?: string;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8').trim();
}

function interactive(): boolean {
  return process.stdin.isTTY === true;
}

function validUrl(value: string): true | string {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' ? true : 'Nimbus answers over HTTPS only: the URL starts with https://';
  } catch {
    return 'Not a URL (e.g. https://nimbus.example.com:8443)';
  }
}

/**
 * The fingerprint to pin for this server, or undefined when the machine trusts its certificate already.
 * Throws when the user (or --fingerprint) does not vouch for it.
 */
async function decideTrust(
  url: string,
  certificate: ServerCertificate,
  expected: string | undefined,
): Promise<string | undefined> {
  if (certificate.trusted) return undefined;
  const fingerprint = normalizeFingerprint(certificate.fingerprint);
  if (expected !== undefined) {
    if (normalizeFingerprint(expected) === fingerprint) return fingerprint;
    throw new NotLoggedInError(
      `The server's certificate fingerprint is ${fingerprint}, not the --fingerprint given; not logged in`,
    );
  }
  const why = certificate.selfSigned
    ? 'is self-signed'
    : `is not trusted by this machine (${certificate.reason})`;
  process.stderr.write(
    `The certificate of ${url} ${why}.\n` +
      `  Subject:             ${certificate.subject}\n` +
      `  Valid until:         ${certificate.validTo}\n` +
      `  SHA-256 fingerprint: ${fingerprint}\n` +
      'Compare it with the one on the server: openssl x509 -in data/tls/cert.pem -noout -fingerprint -sha256\n',
  );
  if (!interactive()) {
    throw new NotLoggedInError(
      'Not trusting it without asking: run nimbus login in a terminal, or pass --fingerprint',
    );
  }
  const trusted = await confirm({ message: 'Trust this certificate for this server?', default: false });
  if (!trusted) throw new NotLoggedInError('Certificate not trusted; not logged in');
  return fingerprint;
}

export function loginCommand(): Command {
  const command = new Command('login')
    .description('sign in to a Nimbus server and keep the key in ~/.config/nimbus/config.json (mode 0600)')
    .option('--url <url>', 'server URL (default: asked)')
    .option('--api-key-stdin', 'read the API key from stdin instead of asking')
    .option('--fingerprint <sha256>', "trust the server's certificate if it has this SHA-256 fingerprint");
  example(
    command,
    'nimbus login',
    'nimbus login --profile staging --url https://staging.example.com:8443',
    'nimbus login --url https://localhost:8443 --api-key-stdin < data/bootstrap-api-key --fingerprint AB:CD:…',
  );
  return command.action(
    withSession<LoginFlags>(async (session, _args, flags) => {
      const name = profileName(session.options);
      const config = readConfig();
      const known = config.profiles[name];
      if ((flags.url === undefined || !flags.apiKeyStdin) && !interactive()) {
        throw new UsageError(
          'nimbus login asks questions: run it in a terminal, or give --url and --api-key-stdin',
        );
      }
      const url = (
        flags.url ??
        (await input({
          message: 'Nimbus URL',
          default: process.env.NIMBUS_URL ?? known?.url ?? DEFAULT_BASE_URL,
          validate: validUrl,
        }))
      ).replace(/\/+$/, '');
      const urlProblem = validUrl(url);
      if (urlProblem !== true) throw new UsageError(urlProblem);
      const fingerprint = await decideTrust(url, await probeCertificate(url), flags.fingerprint);
      const apiKey = flags.apiKeyStdin
        ? await readStdin()
        : await password({
            message: 'API key',
            validate: (value) => value.trim() !== '' || 'The key is required',
          });
      const nimbus = new Nimbus({
        apiKey: apiKey.trim(),
        baseUrl: url,
        ...(fingerprint ? { fingerprint } : {}),
        retry: { maxRetries: 2 },
      });
      try {
        const { data: account } = await nimbus.get('/v1/account');
        const profile: Profile = {
          url,
          api_key: apiKey.trim(),
          ...(fingerprint ? { tls_fingerprint: fingerprint } : {}),
        };
        writeConfig({ profiles: { ...config.profiles, [name]: profile } });
        process.stderr.write(
          `Logged in to ${url} as ${account.email} (${account.id}, ${account.plan} plan); profile "${name}" saved in ${configPath()}\n`,
        );
      } finally {
        await nimbus.close();
      }
    }),
  );
}

export function logoutCommand(): Command {
  const command = new Command('logout').description(
    "forget a profile's URL and key (the key itself stays valid)",
  );
  example(command, 'nimbus logout', 'nimbus logout --profile staging');
  return command.action(
    withSession(async (session) => {
      const name = profileName(session.options);
      const config = readConfig();
      if (!config.profiles[name]) {
        printMessage(`Not logged in (profile "${name}")`, session.out);
        return;
      }
      const { [name]: _forgotten, ...rest } = config.profiles;
      writeConfig({ profiles: rest });
      printMessage(
        `Logged out of profile "${name}"; revoke the key with "nimbus keys delete" if it should stop working`,
        session.out,
      );
    }),
  );
}

export function whoamiCommand(): Command {
  const command = new Command('whoami').description('the account, server and profile the CLI uses now');
  example(command, 'nimbus whoami', 'NIMBUS_API_KEY=nmb_… nimbus whoami -o json');
  return command.action(
    withSession(async (session) => {
      const { data: account } = await session.nimbus.get('/v1/account');
      const connection = session.connection;
      const source = process.env.NIMBUS_API_KEY ? 'NIMBUS_API_KEY' : `profile "${connection.profileName}"`;
      printItem(session, {
        account_id: account.id,
        email: account.email,
        name: account.name,
        plan: account.plan,
        status: account.status,
        url: connection.url,
        key: `${connection.apiKey!.slice(0, 8)}… (${source})`,
        certificate: connection.fingerprint ? `pinned ${connection.fingerprint}` : 'verified by trusted CAs',
      });
    }),
  );
}
