/**
 * The signed-in key. Kept in sessionStorage only (never localStorage or a URL): it lives as long as the
 * tab, and Sign out forgets it.
 */
import { type Api, createApi } from './api.ts';
import { signal } from './signal.ts';

const STORAGE_KEY = 'nimbus.apiKey';

export interface Session {
  apiKey: string;
  api: Api;
}

/** Why the console signed out by itself (shown on the sign-in page); null after a user's own Sign out. */
export const signOutReason = signal<string | null>(null);

const KEY_REFUSED =
  'You were signed out: the API refused your key (401), so it was revoked or has expired. Sign in with a valid key.';

function sessionFor(apiKey: string): Session {
  return { apiKey, api: createApi(apiKey, () => signOut(KEY_REFUSED)) };
}

function restore(): Session | null {
  const apiKey = sessionStorage.getItem(STORAGE_KEY);
  return apiKey ? sessionFor(apiKey) : null;
}

export const session = signal<Session | null>(restore());

export function signIn(apiKey: string): void {
  sessionStorage.setItem(STORAGE_KEY, apiKey);
  signOutReason.set(null);
  session.set(sessionFor(apiKey));
}

/** Forgets the key; `reason` says why when the console did it rather than the user. */
export function signOut(reason: string | null = null): void {
  sessionStorage.removeItem(STORAGE_KEY);
  signOutReason.set(reason);
  session.set(null);
}

/** The signed-in session; pages below the sign-in gate can rely on it. */
export function currentSession(): Session {
  const current = session.get();
  if (!current) throw new Error('not signed in');
  return current;
}
