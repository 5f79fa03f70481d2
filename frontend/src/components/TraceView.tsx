import { useState } from "react";
import { foldTrace } from "../health";

/** A trace with runs of library frames folded behind "… N internal lines" toggles. */
export function TraceView({ trace }: { trace: string }) {
  const [open, setOpen] = useState<Set<number>>(new Set());
  const parts = foldTrace(trace);
  return (
    <pre className="trace" data-testid="trace">
      {parts.map((p, i) =>
        p.folded && !open.has(i) ? (
          <button key={i} type="button" className="fold" onClick={() => setOpen(new Set([...open, i]))}>
            … {p.lines.length} internal lines (show)
            {"\n"}
          </button>
        ) : (
          <span key={i} className={p.folded ? "internal" : undefined}>
            {p.lines.join("\n")}
            {"\n"}
          </span>
        ),
      )}
    </pre>
  );
}
