export function StateBadge({ state }: { state: string | undefined }) {
  const s = state ?? "UNKNOWN";
  return <span className={`badge state-${s.toLowerCase()}`} data-state={s}>{s}</span>;
}
