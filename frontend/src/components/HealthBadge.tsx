import type { Health } from "../types";

const TITLES: Record<Health, string> = {
  healthy: "every task is as its target state asks",
  degraded: "some tasks failed or wait for a worker while others run",
  unassigned: "no worker runs it (yet)",
  failed: "the connector failed, or every one of its tasks did",
};

/** The connector's health word, derived on the server from its tasks. */
export function HealthBadge({ health }: { health: Health | undefined }) {
  const h = health ?? "unassigned";
  return (
    <span className={`badge health-${h}`} data-health={h} title={TITLES[h]}>
      {h}
    </span>
  );
}
