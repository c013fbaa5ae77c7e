/**
 * `usePollWhile(busy, reload)`: reloads a list every few seconds only while `busy` (something on it is in a
 * transitional status). Volumes, snapshots and VPNs have no live stream, and polling a settled list would
 * spend the account's rate limit for nothing.
 */
import { useEffect } from 'preact/hooks';

const POLL_MS = 2000;

export function usePollWhile(busy: boolean, reload: () => void, everyMs = POLL_MS): void {
  useEffect(() => {
    if (!busy) return;
    const timer = setInterval(reload, everyMs);
    return () => clearInterval(timer);
  }, [busy, reload, everyMs]);
}
