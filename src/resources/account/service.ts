/**
 * Accounts: what an account holder sees and may change, and the operator commands (`bin/nimbus admin`)
 * that create accounts and set plans, quotas, rate limits and status.
 */
import type { Clock } from '../../platform/domain/clock.js';
import { newId } from '../../platform/domain/ids.js';
import { ACCOUNT_STATUSES, PLANS, QUOTA_NAMES, type QuotaName } from '../../platform/domain/plans.js';
import { isEmail, isPrintableName, PRINTABLE_NAME_RULE } from '../../platform/domain/validation.js';
import { InvalidRequest, NotFound } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { rateLimitPolicyOf } from '../../platform/rate-limits/rate-limits.js';
import type { Store } from '../../platform/store/db.js';
import type { AccountRow, AccountUpdate } from '../../platform/store/schema.js';
import type { ApiKeyService, CreatedApiKey } from './api-key-service.js';
import * as accounts from './store.js';
import { type AccountView, accountView } from './view.js';

export interface AccountChanges {
  name?: string | undefined;
  email?: string | undefined;
  company?: string | null | undefined;
  billing_email?: string | null | undefined;
}

/** E-mail addresses are compared without regard to case: they are stored lowercased. */
function normalizeEmail<T extends string | undefined>(email: T): T {
  return (email === undefined ? email : email.trim().toLowerCase()) as T;
}

function requireName(field: string, value: string): void {
  if (!isPrintableName(value))
    throw new InvalidRequest(`${field} must be ${PRINTABLE_NAME_RULE}`, { field, value });
}

function requireEmail(field: string, value: string): void {
  if (!isEmail(value)) throw new InvalidRequest(`${field} must be an e-mail address`, { field, value });
}

function requireOneOf<T extends string>(
  field: string,
  value: string,
  allowed: readonly T[],
): asserts value is T {
  if (!allowed.includes(value as T)) {
    throw new InvalidRequest(`${field} must be one of ${allowed.join(', ')}`, {
      field,
      value,
      allowed_values: [...allowed],
    });
  }
}

export class AccountService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly apiKeys: ApiKeyService,
  ) {}

  /**
   * The caller's account as read when its key was verified (at most NIMBUS_AUTH_CACHE_SECONDS old;
   * changes made through this service are seen at once, see update()).
   */
  current(principal: Principal): AccountView {
    return principal.account;
  }

  async get(accountId: string): Promise<AccountView> {
    const row = await accounts.findAccount(this.store.db, accountId);
    if (!row) throw new NotFound('account', accountId);
    return accountView(row);
  }

  async update(accountId: string, requested: AccountChanges): Promise<AccountView> {
    const changes = { ...requested, email: normalizeEmail(requested.email) };
    if (changes.name !== undefined) requireName('name', changes.name);
    if (changes.company !== undefined && changes.company !== null) requireName('company', changes.company);
    if (changes.email !== undefined) requireEmail('email', changes.email);
    if (changes.billing_email) requireEmail('billing_email', changes.billing_email);
    const update: AccountUpdate = { updated_at: this.clock.now().toISOString() };
    if (changes.name !== undefined) update.name = changes.name;
    if (changes.email !== undefined) update.email = changes.email;
    if (changes.company !== undefined) update.company = changes.company;
    if (changes.billing_email !== undefined) update.billing_email = changes.billing_email;
    // The address is a contact, not an identity: another account using it changes nothing here, so this
    // answer cannot tell whether one does (docs/api.md, Account).
    const row = await accounts.updateAccount(this.store.db, accountId, update);
    if (!row) throw new NotFound('account', accountId);
    // Cached principals carry a snapshot of the account: drop them here and on every replica.
    await this.apiKeys.forgetAccount(accountId);
    return accountView(row);
  }

  /**
   * Operator: a new account with one key holding every permission. `sharingEmail` names the accounts that
   * already use its address, for the operator (who sees every account) to notice; it is no refusal.
   */
  async create(request: { email: string; name?: string | undefined; plan?: string | undefined }): Promise<{
    account: AccountView;
    apiKey: CreatedApiKey;
    sharingEmail: string[];
  }> {
    const input = { ...request, email: normalizeEmail(request.email) };
    requireEmail('email', input.email);
    const plan = input.plan ?? 'free';
    requireOneOf('plan', plan, PLANS);
    const name = input.name ?? input.email.split('@')[0] ?? input.email;
    requireName('name', name);
    const sharingEmail = await accounts.accountIdsByEmail(this.store.db, input.email);
    const now = this.clock.now().toISOString();
    const row: AccountRow = {
      id: newId('account'),
      name,
      email: input.email,
      company: null,
      billing_email: null,
      plan,
      status: 'active',
      rate_limit_per_hour: null,
      rate_limit_burst: null,
      created_at: now,
      updated_at: now,
    };
    const apiKey = await this.store.db.transaction().execute(async (trx) => {
      await accounts.insertAccount(trx, row);
      return this.apiKeys.mint(trx, row.id, {
        name: 'admin',
        permissions: ['*'],
        expiresAt: null,
        checkQuota: false,
      });
    });
    return { account: accountView(row), apiKey, sharingEmail };
  }

  async list(): Promise<AccountView[]> {
    return (await accounts.listAccounts(this.store.db)).map(accountView);
  }

  async setPlan(accountId: string, plan: string): Promise<AccountView> {
    requireOneOf('plan', plan, PLANS);
    return this.operatorUpdate(accountId, { plan });
  }

  async setStatus(accountId: string, status: string): Promise<AccountView> {
    requireOneOf('status', status, ACCOUNT_STATUSES);
    return this.operatorUpdate(accountId, { status });
  }

  async setRateLimit(accountId: string, perHour: number, burst: number) {
    for (const [field, value] of [
      ['per_hour', perHour],
      ['burst', burst],
    ] as const) {
      if (!Number.isInteger(value) || value < 1 || value > 100_000_000) {
        throw new InvalidRequest(`${field} must be a whole number from 1 to 100000000`, { field, value });
      }
    }
    const account = await this.operatorUpdate(accountId, {
      rate_limit_per_hour: perHour,
      rate_limit_burst: burst,
    });
    return {
      account,
      rate_limit: rateLimitPolicyOf({
        plan: account.plan,
        rate_limit_per_hour: perHour,
        rate_limit_burst: burst,
      }),
    };
  }

  async setQuota(
    accountId: string,
    name: string,
    limit: number,
  ): Promise<{ name: QuotaName; limit: number }> {
    requireOneOf('name', name, QUOTA_NAMES);
    if (!Number.isInteger(limit) || limit < 0) {
      throw new InvalidRequest('limit must be a whole number of at least 0', {
        field: 'limit',
        value: limit,
      });
    }
    await this.get(accountId);
    await accounts.setQuotaOverride(this.store.db, accountId, name, limit);
    return { name, limit };
  }

  private async operatorUpdate(accountId: string, changes: AccountUpdate): Promise<AccountView> {
    const row = await accounts.updateAccount(this.store.db, accountId, {
      ...changes,
      updated_at: this.clock.now().toISOString(),
    });
    if (!row) throw new NotFound('account', accountId);
    await this.apiKeys.forgetAccount(accountId);
    return accountView(row);
  }
}
