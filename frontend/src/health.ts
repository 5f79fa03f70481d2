// Reading the server's connector health and traces for display.

import type { Health, WorkerName } from "./types";

export const HEALTH_WORDS: Health[] = ["healthy", "degraded", "unassigned", "failed"];

/** One piece of a folded trace: lines shown, or a run of library frames folded behind a toggle. */
export interface TracePart {
  folded: boolean;
  lines: string[];
}

// Frames of code that is not the project's: the interpreter, installed libraries, Spark's JVM bridge.
// (a compiled extension's frames name a relative path: File "pyarrow/_csv.pyx")
const INTERNAL = /site-packages|dist-packages|\/lib\/python\d|<frozen |py4j|pyspark|\.pyx"|^\s*File "(?!\/)[^"]*"|^\s*at (java|javax|jdk|sun|scala|org\.apache)\./;

/** Is this line part of a library frame (its `File ...` line or the source line under it)? */
function frameOf(lines: string[], i: number): "internal" | "project" | null {
  const line = lines[i];
  if (/^\s*File "/.test(line) || /^\s*at [\w$.]+\(/.test(line)) return INTERNAL.test(line) ? "internal" : "project";
  return null;
}

/**
 * The trace split into parts, runs of two or more internal frames (a Python `File "…site-packages…"`
 * line with its source line, or a JVM `at java.…` line) folded; the project's frames and the
 * exception lines stay visible.
 */
export function foldTrace(trace: string): TracePart[] {
  const lines = trace.replace(/\s+$/, "").split("\n");
  const kinds: boolean[] = [];
  for (let i = 0; i < lines.length; i++) {
    const f = frameOf(lines, i);
    if (f !== null) {
      kinds.push(f === "internal");
      // a Python frame's source line belongs to it
      if (/^\s*File "/.test(lines[i]) && i + 1 < lines.length && /^\s{4,}\S/.test(lines[i + 1]) && frameOf(lines, i + 1) === null) {
        kinds.push(f === "internal");
        i++;
      }
    } else kinds.push(false);
  }
  const parts: TracePart[] = [];
  for (let i = 0; i < lines.length; i++) {
    const last = parts[parts.length - 1];
    if (last && last.folded === kinds[i]) last.lines.push(lines[i]);
    else parts.push({ folded: kinds[i], lines: [lines[i]] });
  }
  // a single folded line is not worth a toggle
  return parts
    .map((p) => (p.folded && p.lines.length < 3 ? { folded: false, lines: p.lines } : p))
    .reduce<TracePart[]>((acc, p) => {
      const last = acc[acc.length - 1];
      if (last && !last.folded && !p.folded) last.lines.push(...p.lines);
      else acc.push({ folded: p.folded, lines: [...p.lines] });
      return acc;
    }, []);
}

/** The one name of a worker (node id; the REST address when the node is unknown). */
export function workerLabel(w: WorkerName | null | undefined): string {
  if (!w) return "–";
  return w.node_id ?? w.rest_address ?? "–";
}

/** "2 running, 1 failed" from task state counts (zero counts left out; "no tasks" when empty). */
export function countsText(counts: Record<string, number>): string {
  const parts = Object.entries(counts)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${n} ${s.toLowerCase()}`);
  return parts.length ? parts.join(", ") : "no tasks";
}
