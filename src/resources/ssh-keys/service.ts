/**
 * SSH keys: OpenSSH public keys an account uploads and names on instance create.
 *
 * A name and a key (by fingerprint) are each unique within an account. Both are checked before the
 * insert so the usual 409 names the key already there; the unique constraints behind them turn a
 * concurrent duplicate into the same 409 rather than a 500. Instances copy the keys they boot with, so
 * deleting a key never touches an instance.
 */
import type { Clock } from '../../platform/domain/clock.js';
import { ID_PREFIXES, newId } from '../../platform/domain/ids.js';
import type { PageRequest } from '../../platform/domain/pagination.js';
import { Conflict, InvalidRequest, NotFound } from '../../platform/errors.js';
import { recordEvent } from '../../platform/events/outbox.js';
import { recordCreated } from '../../platform/idempotency/context.js';
import type { Store } from '../../platform/store/db.js';
import { isUniqueViolation } from '../../platform/store/dialect.js';
import type { Executor, SshKeyRow } from '../../platform/store/schema.js';
import { parseSshPublicKey, SshKeyFormatError } from './rules.js';
import * as keys from './store.js';
import { type SshKeyView, sshKeyView } from './view.js';

export interface NewSshKey {
  name: string;
  public_key: string;
}

export type SshKeyListRequest = PageRequest & keys.SshKeyFilters;

const ID_PREFIX = `${ID_PREFIXES.sshKey}_`;

const view = (row: SshKeyRow): SshKeyView => sshKeyView(row);

export class SshKeyService {
  constructor(
    readonly store: Store,
    readonly clock: Clock,
  ) {}

  async create(accountId: string, input: NewSshKey): Promise<SshKeyView> {
    // Instance create takes ids or names in one list, so a name must never look like an id.
    if (input.name.startsWith(ID_PREFIX)) {
      throw new InvalidRequest(`SSH key names may not start with ${ID_PREFIX} (the prefix of key ids)`, {
        field: 'name',
        value: input.name,
      });
    }
    let parsed: ReturnType<typeof parseSshPublicKey>;
    try {
      parsed = parseSshPublicKey(input.public_key);
    } catch (error) {
      if (!(error instanceof SshKeyFormatError)) throw error;
      throw new InvalidRequest(`Invalid public_key: ${error.message}`, {
        field: 'public_key',
        ...(error.allowedValues ? { allowed_values: [...error.allowedValues] } : {}),
      });
    }
    const now = this.clock.now();
    const row: SshKeyRow = {
      id: newId('sshKey', now),
      account_id: accountId,
      name: input.name,
      public_key: parsed.normalized,
      fingerprint: parsed.fingerprint,
      created_at: now.toISOString(),
    };
    try {
      await this.store.db.transaction().execute(async (trx) => {
        await this.ensureUnique(trx, row);
        await keys.insertSshKey(trx, row);
        await recordCreated(trx, 'ssh_key', row.id);
        await recordEvent(trx, this.clock, {
          accountId,
          type: 'ssh_key.created',
          resourceId: row.id,
          data: { ssh_key_id: row.id, name: row.name, fingerprint: row.fingerprint },
        });
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // A concurrent create won the race; name what it created (the failed transaction cannot be read).
      await this.ensureUnique(this.store.db, row);
      throw new Conflict('An SSH key with this name or this public key was created at the same time');
    }
    return view(row);
  }

  /** Throws Conflict naming the account's key that has this key's name or fingerprint. */
  private async ensureUnique(db: Executor, row: SshKeyRow): Promise<void> {
    const clashes = await keys.findSshKeyByNameOrFingerprint(db, row.account_id, row.name, row.fingerprint);
    const sameName = clashes.find((k) => k.name === row.name);
    if (sameName) {
      throw new Conflict(`An SSH key named ${row.name} already exists (${sameName.id})`, {
        field: 'name',
        value: row.name,
        ssh_key_id: sameName.id,
      });
    }
    const sameKey = clashes[0];
    if (sameKey) {
      throw new Conflict(
        `This public key is already uploaded as ${sameKey.name} (${sameKey.id}, ${sameKey.fingerprint})`,
        { field: 'public_key', fingerprint: sameKey.fingerprint, ssh_key_id: sameKey.id, name: sameKey.name },
      );
    }
  }

  async list(accountId: string, request: SshKeyListRequest) {
    const page = await keys.listSshKeys(this.store.db, accountId, request, { name: request.name });
    return { items: page.items.map(view), pagination: page.pagination };
  }

  async get(accountId: string, id: string): Promise<SshKeyView> {
    const row = await keys.findSshKey(this.store.db, accountId, id);
    if (!row) throw new NotFound('ssh_key', id);
    return view(row);
  }

  /** Deletes the key; instances created with it keep it (they hold their own copy). */
  async delete(accountId: string, id: string): Promise<SshKeyView> {
    const row = await this.store.db.transaction().execute(async (trx) => {
      const deleted = await keys.deleteSshKey(trx, accountId, id);
      if (!deleted) throw new NotFound('ssh_key', id);
      await recordEvent(trx, this.clock, {
        accountId,
        type: 'ssh_key.deleted',
        resourceId: id,
        data: { ssh_key_id: id, name: deleted.name, fingerprint: deleted.fingerprint },
      });
      return deleted;
    });
    return view(row);
  }

  /**
   * Ids of the account's keys named by id or name, in the order given (deduplicated); an unknown one is
   * 400 invalid_request with details {field: 'ssh_keys', value: <the ref>}. Runs on the caller's executor,
   * so instance create resolves its keys inside its own transaction.
   */
  async resolve(db: Executor, accountId: string, refs: readonly string[]): Promise<string[]> {
    const found = await keys.findSshKeysByRefs(db, accountId, [...new Set(refs)]);
    const byId = new Map(found.map((k) => [k.id, k.id]));
    const byName = new Map(found.map((k) => [k.name, k.id]));
    const ids: string[] = [];
    for (const ref of refs) {
      const id = byId.get(ref) ?? byName.get(ref);
      if (id === undefined) {
        throw new InvalidRequest(`No SSH key with id or name ${ref} in this account`, {
          field: 'ssh_keys',
          value: ref,
        });
      }
      if (!ids.includes(id)) ids.push(id);
    }
    return ids;
  }
}
