import { useCallback, useEffect, useRef, useState } from "react";

/** How often views refresh (the acceptance asks for at most 2 s). */
export const POLL_MS = 2000;

export interface Polled<T> {
  data: T | undefined;
  error: unknown;
  refresh: () => void;
}

/**
 * Calls `fetcher` now and every `intervalMs` after the previous call finished (never overlapping);
 * a new `key` starts over. `refresh()` fetches at once (after an action).
 */
export function usePoll<T>(fetcher: () => Promise<T>, key: string, intervalMs = POLL_MS): Polled<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const fetcherRef = useRef(fetcher);
  fetcherRef.current = fetcher;
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const run = useRef<() => void>(() => {});

  useEffect(() => {
    let alive = true;
    setData(undefined);
    setError(undefined);
    const tick = async () => {
      clearTimeout(timer.current);
      try {
        const value = await fetcherRef.current();
        if (!alive) return;
        setData(value);
        setError(undefined);
      } catch (err) {
        if (!alive) return;
        setError(err);
      }
      if (alive) timer.current = setTimeout(tick, intervalMs);
    };
    run.current = () => void tick();
    void tick();
    return () => {
      alive = false;
      clearTimeout(timer.current);
    };
  }, [key, intervalMs]);

  const refresh = useCallback(() => run.current(), []);
  return { data, error, refresh };
}
