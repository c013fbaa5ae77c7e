/** Says when live updates are not flowing (connecting, reconnecting with backoff, refused). */
import type { StreamState } from '../live.ts';

export function StreamBanner({ state }: { state: StreamState }) {
  if (state.kind === 'live' || state.kind === 'idle') return null;
  const text =
    state.kind === 'connecting'
      ? 'Connecting to live updates…'
      : state.kind === 'reconnecting'
        ? `Live updates lost; reconnecting in ${state.inSeconds} s (attempt ${state.attempt}).`
        : `Live updates unavailable: ${state.message}`;
  return (
    <p class="notice notice-stream" role="status">
      {text}
    </p>
  );
}
