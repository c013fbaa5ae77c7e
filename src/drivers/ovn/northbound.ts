/**
 * How Nimbus speaks to OVN's northbound database: the OVSDB protocol (RFC 7047, JSON-RPC) over the
 * database's socket, one `transact` per change set. Chosen over `ovn-nbctl` (docs/benchmarks.md, "OVN
 * northbound"): a change set is data (rows and references), so it goes as JSON with no command-line
 * quoting, one transaction makes a whole VPC's change atomic, and a call costs the same however big the
 * database grows, where each `ovn-nbctl` process first downloads the whole database.
 *
 * Remotes: `unix:<path>` and `tcp:<host>:<port>` (the forms ovsdb-server's --remote takes, without the
 * leading "p"). The server's `echo` keep-alives are answered.
 */
import net from 'node:net';

/** An OVSDB atom or datum as the protocol writes it (RFC 7047 section 5.1). */
export type OvsdbValue =
  | string
  | number
  | boolean
  | ['uuid' | 'named-uuid', string]
  | ['set', OvsdbValue[]]
  | ['map', [OvsdbValue, OvsdbValue][]];

export type OvsdbRow = Record<string, OvsdbValue>;
export type OvsdbCondition = [string, '==' | '!=' | 'includes' | 'excludes', OvsdbValue];

export type OvsdbOperation =
  | { op: 'select'; table: string; where: OvsdbCondition[]; columns?: string[] }
  | { op: 'insert'; table: string; row: OvsdbRow; 'uuid-name'?: string }
  | { op: 'update'; table: string; where: OvsdbCondition[]; row: OvsdbRow }
  | { op: 'delete'; table: string; where: OvsdbCondition[] }
  | { op: 'mutate'; table: string; where: OvsdbCondition[]; mutations: [string, string, OvsdbValue][] }
  | { op: 'comment'; comment: string };

export interface OvsdbResult {
  rows?: OvsdbRow[];
  uuid?: ['uuid', string];
  count?: number;
  error?: string;
  details?: string;
}

export class OvsdbError extends Error {}

interface Pending {
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

/**
 * Splits a stream of back-to-back JSON texts (OVSDB puts no delimiter between messages) into the texts.
 * Feed it chunks; it returns the complete texts seen so far and keeps the rest.
 */
export class JsonStreamSplitter {
  private buffer = '';
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Where the next scan starts (what is before it was scanned already). */
  private scanned = 0;

  push(chunk: string): string[] {
    this.buffer += chunk;
    const texts: string[] = [];
    let start = 0;
    for (let i = this.scanned; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === '\\') this.escaped = true;
        else if (c === '"') this.inString = false;
      } else if (c === '"') this.inString = true;
      else if (c === '{' || c === '[') this.depth++;
      else if (c === '}' || c === ']') {
        this.depth--;
        if (this.depth === 0) {
          texts.push(this.buffer.slice(start, i + 1).trim());
          start = i + 1;
        }
      }
    }
    this.buffer = this.buffer.slice(start);
    this.scanned = this.buffer.length;
    return texts;
  }
}

/** Where an OVSDB remote listens, as net.connect takes it. */
export function parseRemote(remote: string): net.NetConnectOpts {
  if (remote.startsWith('unix:')) return { path: remote.slice('unix:'.length) };
  const tcp = /^tcp:(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(remote);
  if (tcp) return { host: tcp[1]!.replace(/^\[|\]$/g, ''), port: Number(tcp[2]) };
  throw new OvsdbError(
    `unsupported OVSDB remote ${JSON.stringify(remote)} (unix:<path> or tcp:<host>:<port>)`,
  );
}

/** One connection to an ovsdb-server, carrying requests and their answers by id. */
export class OvsdbConnection {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closedError: Error | null = null;

  static connect(remote: string, timeoutMs = 5000): Promise<OvsdbConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(parseRemote(remote));
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new OvsdbError(`no answer from OVSDB at ${remote} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new OvsdbConnection(socket, remote));
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(new OvsdbError(`cannot reach OVSDB at ${remote}: ${error.message}`));
      });
    });
  }

  private constructor(
    private readonly socket: net.Socket,
    readonly remote: string,
  ) {
    const splitter = new JsonStreamSplitter();
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      for (const text of splitter.push(chunk)) this.receive(JSON.parse(text));
    });
    const fail = (error: Error) => {
      this.closedError ??= error;
      for (const waiting of this.pending.values()) waiting.reject(this.closedError);
      this.pending.clear();
    };
    socket.on('error', (error) => fail(new OvsdbError(`OVSDB at ${remote}: ${error.message}`)));
    socket.on('close', () => fail(new OvsdbError(`OVSDB connection to ${remote} closed`)));
  }

  private receive(message: {
    id: unknown;
    method?: string;
    params?: unknown;
    result?: unknown;
    error?: unknown;
  }) {
    if (message.method === 'echo') {
      this.socket.write(JSON.stringify({ id: message.id, result: message.params, error: null }));
      return;
    }
    if (typeof message.id !== 'number') return; // notifications: Nimbus monitors nothing
    const waiting = this.pending.get(message.id);
    if (!waiting) return;
    this.pending.delete(message.id);
    if (message.error !== null && message.error !== undefined) {
      waiting.reject(new OvsdbError(`OVSDB ${JSON.stringify(message.error)}`));
    } else waiting.resolve(message.result);
  }

  get closed(): boolean {
    return this.closedError !== null;
  }

  request(method: string, params: unknown[]): Promise<unknown> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.socket.write(JSON.stringify({ id, method, params }));
    });
  }

  /**
   * One transaction: every operation commits or none does. Rejects naming the first failed operation
   * (the server answers an error in that operation's place, or in one past the last for a failed commit).
   */
  async transact(database: string, operations: readonly OvsdbOperation[]): Promise<OvsdbResult[]> {
    const results = (await this.request('transact', [database, ...operations])) as (OvsdbResult | null)[];
    const failed = results.findIndex((r) => r?.error);
    if (failed >= 0) {
      const { error, details } = results[failed]!;
      const what = operations[failed]
        ? `${operations[failed]!.op} ${JSON.stringify(operations[failed])}`
        : 'commit';
      throw new OvsdbError(
        `OVSDB ${database} transaction failed at ${what}: ${error}${details ? ` (${details})` : ''}`,
      );
    }
    return results as OvsdbResult[];
  }

  close(): void {
    this.closedError ??= new OvsdbError(`OVSDB connection to ${this.remote} closed`);
    this.socket.destroy();
  }
}

export const NORTHBOUND = 'OVN_Northbound';

/** The northbound database over one connection, opened again when it was lost. */
export class Northbound {
  private connection: Promise<OvsdbConnection> | null = null;

  constructor(readonly remote: string) {}

  private connect(): Promise<OvsdbConnection> {
    this.connection ??= OvsdbConnection.connect(this.remote).catch((error) => {
      this.connection = null;
      throw error;
    });
    return this.connection;
  }

  async transact(operations: readonly OvsdbOperation[]): Promise<OvsdbResult[]> {
    const connection = await this.connect();
    try {
      return await connection.transact(NORTHBOUND, operations);
    } catch (error) {
      // A lost connection is opened again on the next call; a refused transaction leaves it as it is.
      if (connection.closed) this.connection = null;
      throw error;
    }
  }

  async select(table: string, where: OvsdbCondition[], columns?: string[]): Promise<OvsdbRow[]> {
    const [result] = await this.transact([{ op: 'select', table, where, ...(columns ? { columns } : {}) }]);
    return result?.rows ?? [];
  }

  /**
   * Resolves once every chassis has put into its flows all that was committed before the call (what
   * `ovn-nbctl --wait=hv sync` waits for): bumps NB_Global's `nb_cfg`, which ovn-northd passes on and
   * each ovn-controller acknowledges after installing its flows, then polls `hv_cfg` until it catches up.
   * A change "reaches the data path" at this point, not at its commit.
   */
  async syncHypervisors(timeoutMs = 30_000): Promise<void> {
    const [, selected] = await this.transact([
      { op: 'mutate', table: 'NB_Global', where: [], mutations: [['nb_cfg', '+=', 1]] },
      { op: 'select', table: 'NB_Global', where: [], columns: ['nb_cfg'] },
    ]);
    const target = Number(selected?.rows?.[0]?.nb_cfg);
    if (!Number.isFinite(target)) throw new OvsdbError('the northbound database has no NB_Global row yet');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [global] = await this.select('NB_Global', [], ['hv_cfg']);
      if (Number(global?.hv_cfg) >= target) return;
      if (Date.now() > deadline) {
        throw new OvsdbError(`the chassis did not install nb_cfg ${target} within ${timeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  close(): void {
    void this.connection?.then((c) => c.close()).catch(() => {});
    this.connection = null;
  }
}

/** A set of `values` in OVSDB notation (a one-element set may also be written bare; this never does). */
export function ovsdbSet(values: readonly OvsdbValue[]): OvsdbValue {
  return ['set', [...values]];
}

export function ovsdbMap(entries: Readonly<Record<string, string>>): OvsdbValue {
  return ['map', Object.entries(entries).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))];
}

/** The elements of a set column as read (bare when it has exactly one). */
export function setElements(value: OvsdbValue | undefined): OvsdbValue[] {
  if (value === undefined) return [];
  if (Array.isArray(value) && value[0] === 'set') return value[1] as OvsdbValue[];
  return [value];
}

export function mapEntries(value: OvsdbValue | undefined): Record<string, string> {
  if (!Array.isArray(value) || value[0] !== 'map') return {};
  return Object.fromEntries((value[1] as [OvsdbValue, OvsdbValue][]).map(([k, v]) => [String(k), String(v)]));
}

export function uuidOf(value: OvsdbValue | undefined): string {
  if (Array.isArray(value) && value[0] === 'uuid') return value[1] as string;
  throw new OvsdbError(`expected a uuid, got ${JSON.stringify(value)}`);
}
