export function StateBadge({ state }: { state: string | undefined }) {
  const s = state ?? "UNKNOWN";
  return <span className={`badge state-${s.toLowerCase().replace(/\s+/g, "-")}`} data-state={s}>{s}</span>;
}
