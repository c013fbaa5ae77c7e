/**
 * `useAttempt()`: the one way a page runs an action against the API. `attempt(action)` clears the last
 * failure, runs the action and, when it throws, keeps the failure for `<ErrorNotice error={error} />`
 * (an ApiError carries the API's message and request id). It resolves to whether the action succeeded,
 * so a caller can undo what it showed optimistically; it never rejects. `busy` is true while any attempt
 * of this hook runs (a submit button can be disabled with it).
 */
import { useCallback, useState } from 'preact/hooks';

export interface Attempt {
  error: unknown;
  setError: (error: unknown) => void;
  busy: boolean;
  attempt: (action: () => unknown) => Promise<boolean>;
}

export function useAttempt(): Attempt {
  const [error, setError] = useState<unknown>(null);
  const [running, setRunning] = useState(0);
  const attempt = useCallback(async (action: () => unknown) => {
    setError(null);
    setRunning((n) => n + 1);
    try {
      await action();
      return true;
    } catch (failure) {
      setError(failure);
      return false;
    } finally {
      setRunning((n) => n - 1);
    }
  }, []);
  return { error, setError, busy: running > 0, attempt };
}
