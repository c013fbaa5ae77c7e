/**
 * `useLoad(fetcher, deps)`: a page's data, its error and a `reload()`. Every page loads through it, so
 * loading, failure and retry look the same everywhere.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';

export interface Loaded<T> {
  data: T | null;
  error: unknown;
  loading: boolean;
  reload: () => void;
}

export function useLoad<T>(fetcher: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [generation, setGeneration] = useState(0);
  const reload = useCallback(() => setGeneration((n) => n + 1), []);

  // The caller names what the fetcher depends on (deps); the fetcher itself is a new closure each render.
  useEffect(() => {
    let current = true;
    setLoading(true);
    fetcher().then(
      (value) => {
        if (!current) return;
        setData(value);
        setError(null);
        setLoading(false);
      },
      (failure: unknown) => {
        if (!current) return;
        setError(failure);
        setLoading(false);
      },
    );
    return () => {
      current = false;
    };
  }, [...deps, generation]);

  return { data, error, loading, reload };
}
