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

function restore(): Session | null {
  const apiKey = sessionStorage.getItem(STORAGE_KEY);
  return apiKey ? { apiKey, api: createApi(apiKey) } : null;
}

export const session = signal<Session | null>(restore());

export function signIn(apiKey: string): void {
  sessionStorage.setItem(STORAGE_KEY, apiKey);
  session.set({ apiKey, api: createApi(apiKey) });
}

export function signOut(): void {
  sessionStorage.removeItem(STORAGE_KEY);
  session.set(null);
}

/** The signed-in session; pages below the sign-in gate can rely on it. */
export function currentSession(): Session {
  const current = session.get();
  if (!current) throw new Error('not signed in');
  return current;
}
