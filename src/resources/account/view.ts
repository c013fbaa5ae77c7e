import type { AccountStatus, Plan } from '../../platform/domain/plans.js';
import type { AccountRow } from '../../platform/store/schema.js';

/** An account as its holder sees it. */
export interface AccountView {
  id: string;
  name: string;
  email: string;
  company: string | null;
  billing_email: string | null;
  plan: Plan;
  status: AccountStatus;
  created_at: string;
  updated_at: string;
}

declare module '../../platform/principal.js' {
  interface Principal {
    /** The account as read when the key was verified (GET /account answers with it). */
    account: AccountView;
  }
}

export function accountView(row: AccountRow): AccountView {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    company: row.company,
    billing_email: row.billing_email,
    plan: row.plan,
    status: row.status,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
