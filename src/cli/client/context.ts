/**
 * What every client command starts from: the global options (profile, output format), the credentials
 * they select, and an SDK client made from them. Precedence: NIMBUS_API_KEY and NIMBUS_URL over the
 * profile (so CI needs no config file), the profile over the SDK's defaults. A profile's pinned
 * certificate applies only to the URL it was trusted for.
 */
import { DEFAULT_BASE_URL, Nimbus, type RetryInfo } from '@nimbus/sdk';
import { configPath, DEFAULT_PROFILE, type Profile, readConfig } from './config-file.js';
import { NotLoggedInError } from './exit-codes.js';
import { colorWanted, type OutputFormat, type OutputSettings } from './output.js';

export interface GlobalOptions {
  profile?: string;
  output: OutputFormat;
  headers: boolean;
  color: boolean;
  verbose?: boolean;
}

export interface Connection {
  profileName: string;
  profile: Profile | undefined;
  url: string;
  apiKey: string | undefined;
  fingerprint: string | undefined;
}

export function profileName(options: Pick<GlobalOptions, 'profile'>, env = process.env): string {
  return options.profile ?? env.NIMBUS_PROFILE ?? DEFAULT_PROFILE;
}

export function resolveConnection(options: Pick<GlobalOptions, 'profile'>, env = process.env): Connection {
  const name = profileName(options, env);
  const profile = readConfig(configPath(env)).profiles[name];
  const url = (env.NIMBUS_URL ?? profile?.url ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
  const fingerprint =
    env.NIMBUS_TLS_FINGERPRINT || (profile && profile.url === url ? profile.tls_fingerprint : undefined);
  return { profileName: name, profile, url, apiKey: env.NIMBUS_API_KEY || profile?.api_key, fingerprint };
}

export function outputSettings(options: GlobalOptions, env = process.env): OutputSettings {
  const stdout = process.stdout;
  return {
    format: options.output,
    headers: options.headers,
    color: options.color && colorWanted(stdout, env),
    width: stdout.isTTY ? stdout.columns || 80 : null,
    write: (text) => stdout.write(text),
  };
}

/** Stderr notes (retries, progress) that never mix with the results on stdout. */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

function retryNote(verbose: boolean) {
  return (retry: RetryInfo) => {
    const reason = retry.status === 429 ? 'rate limited' : 'service unavailable';
    const asked = retry.retryAfter === null ? '' : `, Retry-After ${retry.retryAfter} s`;
    const key = verbose && retry.idempotencyKey ? `, Idempotency-Key ${retry.idempotencyKey}` : '';
    note(
      `${retry.status} ${reason}: retry ${retry.retry} in ${(retry.delayMs / 1000).toFixed(1)} s` +
        ` (${retry.method} ${new URL(retry.url).pathname}${asked}${key}, request_id ${retry.requestId ?? '-'})`,
    );
  };
}

export function connect(connection: Connection, options: Pick<GlobalOptions, 'verbose'>): Nimbus {
  if (!connection.apiKey) {
    throw new NotLoggedInError(
      `Not logged in (profile "${connection.profileName}"): run "nimbus login" or set NIMBUS_API_KEY`,
    );
  }
  return new Nimbus({
    apiKey: connection.apiKey,
    baseUrl: connection.url,
    ...(connection.fingerprint ? { fingerprint: connection.fingerprint } : {}),
    retry: { onRetry: retryNote(options.verbose === true) },
  });
}
