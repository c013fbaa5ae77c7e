/**
 * Configuration: the environment is read here once, checked against a schema, and passed down as a
 * typed object. Nothing else in Nimbus reads process.env.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FormatRegistry, type Static, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

FormatRegistry.Set('date', (value) => /^\d{4}-\d{2}-\d{2}$/.test(value) && !Number.isNaN(Date.parse(value)));

/** Settings whose values are secrets: never repeated in a message. */
const SECRET_SETTINGS = new Set(['NIMBUS_SECRET_KEY', 'NIMBUS_METRICS_TOKEN']);
/** Base64 of exactly 32 bytes. */
const MASTER_KEY_PATTERN = '^[A-Za-z0-9+/]{43}=$';
const Port = Type.Integer({ minimum: 0, maximum: 65535 });
/** An OVSDB remote as Nimbus's client reaches it (drivers/ovn/northbound.ts): a unix socket or TCP. */
const OVSDB_REMOTE = '^(unix:/.+|tcp:(\\[[0-9A-Fa-f:.]+\\]|[^:\\s]+):\\d{1,5})$';
/** The host's own Open vSwitch database, where Debian's openvswitch-switch puts it. */
export const SYSTEM_OVS_DB = 'unix:/var/run/openvswitch/db.sock';
/** The integration bridge every OVN chassis has unless its `external_ids:ovn-bridge` names another. */
export const DEFAULT_OVN_BRIDGE = 'br-int';
/** A network interface's name as the kernel takes it: 15 characters at most (IFNAMSIZ less its NUL). */
const INTERFACE_NAME = '^[A-Za-z0-9_.:-]{1,15}$';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

const EnvSchema = Type.Object({
  NIMBUS_DATA_DIR: Type.String({ default: './data', minLength: 1 }),
  NIMBUS_HTTPS_PORT: Type.Optional(Port),
  NIMBUS_HTTP_PORT: Type.Optional(Port),
  NIMBUS_HOST: Type.String({ default: '127.0.0.1' }),
  NIMBUS_TLS_CERT: Type.Optional(Type.String({ minLength: 1 })),
  NIMBUS_TLS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  NIMBUS_TRUST_PROXY: Type.Optional(Type.String()),
  NIMBUS_DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  NIMBUS_REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  NIMBUS_DRIVER: Type.Union([Type.Literal('simulator'), Type.Literal('qemu')], { default: 'simulator' }),
  NIMBUS_SIM_SPEEDUP: Type.Number({ default: 1, exclusiveMinimum: 0 }),
  /** Guest images of the qemu driver (`nimbus admin images build`); default `<data dir>/images`. */
  NIMBUS_IMAGE_DIR: Type.Optional(Type.String({ minLength: 1 })),
  /** A VM's memory is its type's RAM times this (0.125: compute-1x's 2 GB runs in 256 MiB). */
  NIMBUS_QEMU_MEMORY_SCALE: Type.Number({ default: 0.125, exclusiveMinimum: 0, maximum: 1 }),
  /** kvm, tcg, or auto: KVM when /dev/kvm can run a guest, TCG otherwise. */
  NIMBUS_QEMU_ACCEL: Type.Union([Type.Literal('auto'), Type.Literal('kvm'), Type.Literal('tcg')], {
    default: 'auto',
  }),
  /** Host ports the qemu driver forwards to its guests' SSH servers, `first-last`, on NIMBUS_HOST. */
  NIMBUS_QEMU_SSH_PORTS: Type.String({ default: '22000-22999', pattern: '^\\d{1,5}-\\d{1,5}$' }),
  /** The qemu driver's network: `user` (QEMU user-mode, SSH forwarded) or `ovn` (real networks on OVN). */
  NIMBUS_NETWORK: Type.Union([Type.Literal('user'), Type.Literal('ovn')], { default: 'user' }),
  /** With `ovn`: an existing OVN central's northbound and southbound databases (unset: Nimbus runs its own). */
  NIMBUS_OVN_NB_URL: Type.Optional(Type.String({ pattern: OVSDB_REMOTE })),
  NIMBUS_OVN_SB_URL: Type.Optional(Type.String({ pattern: OVSDB_REMOTE })),
  /** With an existing OVN central: this host's Open vSwitch database. */
  NIMBUS_OVS_DB: Type.Optional(Type.String({ pattern: OVSDB_REMOTE })),
  /**
   * With an existing OVN central: the integration bridge this host's ovn-controller uses (its
   * `external_ids:ovn-bridge`), default br-int. An interface name: 15 characters at most (IFNAMSIZ).
   */
  NIMBUS_OVN_BRIDGE: Type.Optional(Type.String({ pattern: INTERFACE_NAME })),
  /** With `ovn`: the host interface the public pools live on (a NIC, or one end of a veth pair). */
  NIMBUS_PUBLIC_UPLINK: Type.Optional(Type.String({ pattern: INTERFACE_NAME })),
  /** With NIMBUS_PUBLIC_UPLINK: the upstream router on the link (default: each pool's first address). */
  NIMBUS_PUBLIC_GATEWAY: Type.Optional(
    Type.String({ pattern: '^(25[0-5]|2[0-4]\\d|1?\\d?\\d)(\\.(25[0-5]|2[0-4]\\d|1?\\d?\\d)){3}$' }),
  ),
  NIMBUS_PUBLIC_DOMAIN: Type.String({ default: 'nimbus.example.net' }),
  NIMBUS_METRICS_PORT: Type.Optional(Port),
  /** When set, the metrics port answers only `Authorization: Bearer <this>` (16+ printable characters). */
  NIMBUS_METRICS_TOKEN: Type.Optional(Type.String({ pattern: '^[\\x21-\\x7e]{16,1024}$' })),
  NIMBUS_METADATA_PORT: Type.Optional(Port),
  /** UDP and TCP port of the authoritative DNS server for NIMBUS_PUBLIC_DOMAIN; unset or 0: no DNS server. */
  NIMBUS_DNS_PORT: Type.Optional(Port),
  NIMBUS_LOG_LEVEL: Type.Union(
    LOG_LEVELS.map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  /** End of life of /v1 as an ISO date; when set, /v1 answers carry Deprecation and Sunset headers. */
  NIMBUS_V1_END_OF_LIFE: Type.Optional(Type.String({ format: 'date' })),
  /** GPUs each region can hand out, as `region=count,…`; regions not named have none. */
  NIMBUS_GPU_CAPACITY: Type.Optional(Type.String()),
  /** Public IPv4 pools as `region=cidr,…`; regions not named keep their default documentation range. */
  NIMBUS_PUBLIC_IP_POOLS: Type.Optional(Type.String()),
  /** Seconds a verified API key is served from memory before it is read again. */
  NIMBUS_AUTH_CACHE_SECONDS: Type.Number({ default: 5, minimum: 0, maximum: 300 }),
  /** 1/true: webhook receivers may be on loopback, private and link-local addresses. */
  NIMBUS_WEBHOOK_ALLOW_PRIVATE: Type.Optional(Type.String({ pattern: '^(0|1|true|false)$' })),
  /** PEM file of an extra CA trusted for webhook receivers. */
  NIMBUS_WEBHOOK_CA_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /** First webhook retry delay in seconds; it doubles with each retry. */
  NIMBUS_WEBHOOK_RETRY_BASE_SECONDS: Type.Number({ default: 60, exclusiveMinimum: 0, maximum: 86_400 }),
  /** Base64 of 32 bytes sealing secrets at rest; replicas sharing a database must share it. */
  NIMBUS_SECRET_KEY: Type.Optional(Type.String({ pattern: MASTER_KEY_PATTERN })),
  /** A file holding NIMBUS_SECRET_KEY's value (base64 of 32 bytes), e.g. a mounted secret. */
  NIMBUS_SECRET_KEY_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /** Seconds between two samples of each monitored instance (10 s blocks; tests and demos use 1). */
  NIMBUS_METRICS_INTERVAL_SECONDS: Type.Integer({ default: 10, minimum: 1, maximum: 10 }),
  /** Live metric streams an account may hold open at once (per server process). */
  NIMBUS_METRICS_MAX_STREAMS: Type.Integer({ default: 100, minimum: 1, maximum: 100_000 }),
  /** Days from an invoice's issue to its due date; an open invoice past it makes the account past due. */
  NIMBUS_INVOICE_DUE_DAYS: Type.Integer({ default: 14, minimum: 0, maximum: 365 }),
  /** SMTP relay for alert e-mail: smtp://host:port or smtps://user:pass@host:port; unset refuses e-mail channels. */
  NIMBUS_SMTP_URL: Type.Optional(Type.String({ pattern: '^smtps?://' })),
  /** The sender of alert e-mail (default: Nimbus <alerts@NIMBUS_PUBLIC_DOMAIN>). */
  NIMBUS_SMTP_FROM: Type.Optional(Type.String({ minLength: 3 })),
  /** PEM file of an extra CA trusted for the SMTP relay's certificate. */
  NIMBUS_SMTP_CA_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /** Where the console is, for links in alert messages (default: https://NIMBUS_HOST:NIMBUS_HTTPS_PORT/console). */
  NIMBUS_CONSOLE_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** Longest a request (line, headers and body) may take to arrive; past it the answer is 408. */
  NIMBUS_REQUEST_TIMEOUT_MS: Type.Integer({ default: 30_000, minimum: 100, maximum: 600_000 }),
  /** Connections one client address may hold open at once on the API's listeners; 0: no cap. */
  NIMBUS_MAX_CONNECTIONS_PER_ADDRESS: Type.Integer({ default: 256, minimum: 0, maximum: 1_000_000 }),
  /** Tests only (NODE_ENV=test): a file holding an ISO time the process takes as now (src/platform/test-clock.ts). */
  NIMBUS_TEST_CLOCK_FILE: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * Tests only (refused unless NODE_ENV=test): milliseconds SQLite's group commit waits before each
   * COMMIT, so a test can kill the server while answers wait for their commit.
   */
  NIMBUS_TEST_COMMIT_DELAY_MS: Type.Integer({ default: 0, minimum: 0, maximum: 60_000 }),
  /**
   * Tests only (refused unless NODE_ENV=test): "1" makes the process kill itself (SIGKILL) when a request
   * that claimed an Idempotency-Key is about to save its answer, after its transaction committed, so a
   * test can retry a create whose process died before answering.
   */
  NIMBUS_TEST_CRASH_AFTER_COMMIT: Type.Optional(Type.String({ pattern: '^(0|1)$' })),
});

/**
 * `user`: QEMU's user-mode network. `ovn`: OVN, run by Nimbus under `<data dir>/ovn` (`central: null`) or
 * an existing central with this host's Open vSwitch.
 */
export type NetworkConfig =
  | { mode: 'user' }
  | {
      mode: 'ovn';
      central: OvnCentralConfig | null;
      /** NIMBUS_PUBLIC_UPLINK and NIMBUS_PUBLIC_GATEWAY (null: each pool's first address); absent: no public link. */
      uplink?: PublicUplinkConfig;
    };

/** An existing OVN central, and this host's Open vSwitch and integration bridge as its chassis. */
export interface OvnCentralConfig {
  nbUrl: string;
  sbUrl: string;
  ovsDb: string;
  /** NIMBUS_OVN_BRIDGE: where the VMs' taps and the VPCs' host ports go. */
  bridge: string;
}

export interface PublicUplinkConfig {
  interface: string;
  gateway: string | null;
}

export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  dataDir: string;
  host: string;
  httpsPort: number;
  /** 0 disables the plain-HTTP listener. */
  httpPort: number;
  tls: { certFile: string; keyFile: string } | null;
  /** Fastify's trustProxy: true, or a list of trusted proxy addresses/CIDRs. */
  trustProxy: boolean | string;
  databaseUrl: string | undefined;
  redisUrl: string | undefined;
  driver: 'simulator' | 'qemu';
  simSpeedup: number;
  /** The qemu driver's settings (docs/operations.md, "Real compute"). */
  qemu: {
    imageDir: string;
    memoryScale: number;
    accel: 'auto' | 'kvm' | 'tcg';
    sshPorts: { first: number; last: number };
  };
  /** The qemu driver's network (docs/operations.md, "OVN: real networks"). */
  network: NetworkConfig;
  publicDomain: string;
  /** 0 disables the Prometheus listener. */
  metricsPort: number;
  /** NIMBUS_METRICS_TOKEN: the bearer token the metrics port asks for; null: none asked. */
  metricsToken: string | null;
  metadataPort: number;
  /** 0: no DNS server (the default: an operator opts in, as port 53 needs privileges and a delegation). */
  dnsPort: number;
  logLevel: LogLevel;
  v1EndOfLife: Date | null;
  authCacheMs: number;
  /**
   * NIMBUS_GPU_CAPACITY and NIMBUS_PUBLIC_IP_POOLS as given (null: not set): their regions are the
   * catalogue's, so the instances resource reads them (resources/instances/region-settings.ts).
   */
  gpuCapacity: string | null;
  publicIpPools: string | null;
  webhooks: { allowPrivate: boolean; caFile: string | null; retryBaseSeconds: number };
  /**
   * The master key from NIMBUS_SECRET_KEY or NIMBUS_SECRET_KEY_FILE, and which of them (the file's path
   * included) for messages; null: none configured, the data dir's key file (SQLite only).
   */
  masterKey: Buffer | null;
  masterKeySource: string | null;
  metrics: { intervalSeconds: number; maxStreamsPerAccount: number };
  invoiceDueDays: number;
  /** Alert notifications: the SMTP relay (null: e-mail channels are refused), sender, console links. */
  alerts: { smtpUrl: string | null; smtpFrom: string; smtpCaFile: string | null; consoleUrl: string };
  /** Limits of the API's listeners (platform/http/listener-limits.ts). */
  listener: { requestTimeoutMs: number; maxConnectionsPerAddress: number };
  /** NIMBUS_TEST_CLOCK_FILE: the process runs on the time in this file (tests only); null: the system clock. */
  testClockFile: string | null;
  /** NIMBUS_TEST_COMMIT_DELAY_MS: the wait before each SQLite group COMMIT (tests only; 0 otherwise). */
  testCommitDelayMs: number;
  /** NIMBUS_TEST_CRASH_AFTER_COMMIT: die before saving a keyed request's answer (tests only; false otherwise). */
  testCrashAfterCommit: boolean;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const relevant = Object.fromEntries(
    Object.entries(env).filter(
      ([name, value]) => name.startsWith('NIMBUS_') && value !== undefined && value !== '',
    ),
  );
  const converted = Value.Default(EnvSchema, Value.Convert(EnvSchema, relevant));
  const errors = [...Value.Errors(EnvSchema, converted)];
  if (errors.length > 0) {
    const lines = errors.map((e) => {
      const name = e.path.slice(1);
      // A secret's wrong value may be the right one with a typo: it never reaches a terminal or a log.
      const got = SECRET_SETTINGS.has(name) ? 'value not shown' : `got ${JSON.stringify(e.value)}`;
      return `${name}: ${e.message} (${got})`;
    });
    throw new ConfigError(`Invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const raw = converted as Static<typeof EnvSchema>;
  const masterKey = configuredMasterKey(raw.NIMBUS_SECRET_KEY, raw.NIMBUS_SECRET_KEY_FILE);
  if (Boolean(raw.NIMBUS_TLS_CERT) !== Boolean(raw.NIMBUS_TLS_KEY)) {
    throw new ConfigError('Invalid configuration: NIMBUS_TLS_CERT and NIMBUS_TLS_KEY must be set together');
  }
  // A delayed commit slows every write: never in a server that serves anyone.
  if (raw.NIMBUS_TEST_COMMIT_DELAY_MS > 0 && env.NODE_ENV !== 'test') {
    throw new ConfigError(
      'Invalid configuration: NIMBUS_TEST_COMMIT_DELAY_MS is for tests only (NODE_ENV=test)',
    );
  }
  // A clock from a file would let whoever can write that file decide what everyone is billed.
  if (raw.NIMBUS_TEST_CLOCK_FILE && env.NODE_ENV !== 'test') {
    throw new ConfigError('Invalid configuration: NIMBUS_TEST_CLOCK_FILE is for tests only (NODE_ENV=test)');
  }
  // A server that kills itself on every keyed request serves nobody.
  if (raw.NIMBUS_TEST_CRASH_AFTER_COMMIT === '1' && env.NODE_ENV !== 'test') {
    throw new ConfigError(
      'Invalid configuration: NIMBUS_TEST_CRASH_AFTER_COMMIT is for tests only (NODE_ENV=test)',
    );
  }
  const network = networkConfig(raw);
  return {
    dataDir: path.resolve(raw.NIMBUS_DATA_DIR),
    host: raw.NIMBUS_HOST,
    httpsPort: raw.NIMBUS_HTTPS_PORT ?? 8443,
    httpPort: raw.NIMBUS_HTTP_PORT ?? 8080,
    tls:
      raw.NIMBUS_TLS_CERT && raw.NIMBUS_TLS_KEY
        ? { certFile: path.resolve(raw.NIMBUS_TLS_CERT), keyFile: path.resolve(raw.NIMBUS_TLS_KEY) }
        : null,
    trustProxy: parseTrustProxy(raw.NIMBUS_TRUST_PROXY),
    databaseUrl: raw.NIMBUS_DATABASE_URL,
    redisUrl: raw.NIMBUS_REDIS_URL,
    driver: raw.NIMBUS_DRIVER,
    simSpeedup: raw.NIMBUS_SIM_SPEEDUP,
    qemu: {
      imageDir: path.resolve(raw.NIMBUS_IMAGE_DIR ?? path.join(raw.NIMBUS_DATA_DIR, 'images')),
      memoryScale: raw.NIMBUS_QEMU_MEMORY_SCALE,
      accel: raw.NIMBUS_QEMU_ACCEL,
      sshPorts: parsePortRange(raw.NIMBUS_QEMU_SSH_PORTS),
    },
    network,
    publicDomain: raw.NIMBUS_PUBLIC_DOMAIN,
    metricsPort: raw.NIMBUS_METRICS_PORT ?? 9464,
    metricsToken: raw.NIMBUS_METRICS_TOKEN ?? null,
    metadataPort: raw.NIMBUS_METADATA_PORT ?? 8169,
    dnsPort: raw.NIMBUS_DNS_PORT ?? 0,
    logLevel: raw.NIMBUS_LOG_LEVEL,
    v1EndOfLife: raw.NIMBUS_V1_END_OF_LIFE ? new Date(`${raw.NIMBUS_V1_END_OF_LIFE}T00:00:00Z`) : null,
    authCacheMs: raw.NIMBUS_AUTH_CACHE_SECONDS * 1000,
    gpuCapacity: raw.NIMBUS_GPU_CAPACITY ?? null,
    publicIpPools: raw.NIMBUS_PUBLIC_IP_POOLS ?? null,
    webhooks: {
      allowPrivate: raw.NIMBUS_WEBHOOK_ALLOW_PRIVATE === '1' || raw.NIMBUS_WEBHOOK_ALLOW_PRIVATE === 'true',
      caFile: raw.NIMBUS_WEBHOOK_CA_FILE ? path.resolve(raw.NIMBUS_WEBHOOK_CA_FILE) : null,
      retryBaseSeconds: raw.NIMBUS_WEBHOOK_RETRY_BASE_SECONDS,
    },
    masterKey: masterKey?.key ?? null,
    masterKeySource: masterKey?.source ?? null,
    metrics: {
      intervalSeconds: raw.NIMBUS_METRICS_INTERVAL_SECONDS,
      maxStreamsPerAccount: raw.NIMBUS_METRICS_MAX_STREAMS,
    },
    invoiceDueDays: raw.NIMBUS_INVOICE_DUE_DAYS,
    alerts: {
      smtpUrl: raw.NIMBUS_SMTP_URL ?? null,
      smtpFrom: raw.NIMBUS_SMTP_FROM ?? `Nimbus <alerts@${raw.NIMBUS_PUBLIC_DOMAIN}>`,
      smtpCaFile: raw.NIMBUS_SMTP_CA_FILE ? path.resolve(raw.NIMBUS_SMTP_CA_FILE) : null,
      consoleUrl: (
        raw.NIMBUS_CONSOLE_URL ?? `https://${raw.NIMBUS_HOST}:${raw.NIMBUS_HTTPS_PORT ?? 8443}/console`
      ).replace(/\/+$/, ''),
    },
    listener: {
      requestTimeoutMs: raw.NIMBUS_REQUEST_TIMEOUT_MS,
      maxConnectionsPerAddress: raw.NIMBUS_MAX_CONNECTIONS_PER_ADDRESS,
    },
    testClockFile: raw.NIMBUS_TEST_CLOCK_FILE ? path.resolve(raw.NIMBUS_TEST_CLOCK_FILE) : null,
    testCommitDelayMs: raw.NIMBUS_TEST_COMMIT_DELAY_MS,
    testCrashAfterCommit: raw.NIMBUS_TEST_CRASH_AFTER_COMMIT === '1',
  };
}

/** The key from the variable or the file named (never both); null when neither is set. */
function configuredMasterKey(
  value: string | undefined,
  file: string | undefined,
): { key: Buffer; source: string } | null {
  if (value && file) {
    throw new ConfigError('Invalid configuration: set NIMBUS_SECRET_KEY or NIMBUS_SECRET_KEY_FILE, not both');
  }
  if (value) return { key: Buffer.from(value, 'base64'), source: 'NIMBUS_SECRET_KEY' };
  if (!file) return null;
  const source = `NIMBUS_SECRET_KEY_FILE (${path.resolve(file)})`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (error) {
    throw new ConfigError(
      `Invalid configuration: ${source} cannot be read: ${(error as NodeJS.ErrnoException).code ?? error}`,
    );
  }
  // The message never shows the file's content: it is the key, or close to it.
  if (!new RegExp(MASTER_KEY_PATTERN).test(text)) {
    throw new ConfigError(
      `Invalid configuration: ${source} must hold the base64 of 32 random bytes (e.g. from "openssl rand -base64 32") and nothing else`,
    );
  }
  return { key: Buffer.from(text, 'base64'), source };
}

/** "1"/"true" trusts any proxy; anything else is a comma-separated list of proxy addresses or CIDRs. */
function parseTrustProxy(value: string | undefined): boolean | string {
  if (value === undefined) return false;
  if (value === '1' || value.toLowerCase() === 'true') return true;
  if (value === '0' || value.toLowerCase() === 'false') return false;
  return value;
}

function networkConfig(raw: Static<typeof EnvSchema>): NetworkConfig {
  const ovnOnly = (
    [
      'NIMBUS_OVN_NB_URL',
      'NIMBUS_OVN_SB_URL',
      'NIMBUS_OVS_DB',
      'NIMBUS_OVN_BRIDGE',
      'NIMBUS_PUBLIC_UPLINK',
      'NIMBUS_PUBLIC_GATEWAY',
    ] as const
  ).filter((name) => raw[name] !== undefined);
  if (raw.NIMBUS_NETWORK === 'user') {
    if (ovnOnly.length > 0) {
      throw new ConfigError(`Invalid configuration: ${ovnOnly.join(', ')} need NIMBUS_NETWORK=ovn`);
    }
    return { mode: 'user' };
  }
  // The simulator runs no guest: a real network under it would carry nothing.
  if (raw.NIMBUS_DRIVER !== 'qemu') {
    throw new ConfigError('Invalid configuration: NIMBUS_NETWORK=ovn needs NIMBUS_DRIVER=qemu');
  }
  if (raw.NIMBUS_PUBLIC_GATEWAY !== undefined && raw.NIMBUS_PUBLIC_UPLINK === undefined) {
    throw new ConfigError(
      'Invalid configuration: NIMBUS_PUBLIC_GATEWAY is the upstream router on NIMBUS_PUBLIC_UPLINK: set the uplink too',
    );
  }
  // Whether the gateway lies in a region's pool is checked with the pools (drivers/ovn/uplink.ts).
  const uplink: { uplink?: PublicUplinkConfig } =
    raw.NIMBUS_PUBLIC_UPLINK === undefined
      ? {}
      : { uplink: { interface: raw.NIMBUS_PUBLIC_UPLINK, gateway: raw.NIMBUS_PUBLIC_GATEWAY ?? null } };
  const { NIMBUS_OVN_NB_URL: nbUrl, NIMBUS_OVN_SB_URL: sbUrl } = raw;
  if (Boolean(nbUrl) !== Boolean(sbUrl)) {
    throw new ConfigError(
      'Invalid configuration: NIMBUS_OVN_NB_URL and NIMBUS_OVN_SB_URL name one OVN central: set both or neither',
    );
  }
  if (!nbUrl || !sbUrl) {
    // The embedded OVN names its own bridge after the data dir (drivers/ovn/daemons.ts), so that two
    // data dirs on one host never share one.
    for (const name of ['NIMBUS_OVS_DB', 'NIMBUS_OVN_BRIDGE'] as const) {
      if (raw[name] !== undefined) {
        throw new ConfigError(
          `Invalid configuration: ${name} is for an existing OVN central (NIMBUS_OVN_NB_URL); without one Nimbus runs its own Open vSwitch`,
        );
      }
    }
    return { mode: 'ovn', central: null, ...uplink };
  }
  const central: OvnCentralConfig = {
    nbUrl,
    sbUrl,
    ovsDb: raw.NIMBUS_OVS_DB ?? SYSTEM_OVS_DB,
    bridge: raw.NIMBUS_OVN_BRIDGE ?? DEFAULT_OVN_BRIDGE,
  };
  return { mode: 'ovn', central, ...uplink };
}

function parsePortRange(value: string): { first: number; last: number } {
  const [first, last] = value.split('-').map(Number) as [number, number];
  if (first < 1 || last > 65535 || first > last) {
    throw new ConfigError('Invalid configuration: NIMBUS_QEMU_SSH_PORTS is first-last, within 1-65535');
  }
  return { first, last };
}
