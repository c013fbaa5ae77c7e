// on-exit-leak-free (pino's own dependency) ships no types; this is the part Nimbus uses.
declare module 'on-exit-leak-free' {
  /** Calls `shutdown(target, 'exit')` on process exit unless `target` has been garbage-collected. */
  export function register<T extends object>(target: T, shutdown: (target: T, event: 'exit') => void): void;
  export function unregister(target: object): void;
}
