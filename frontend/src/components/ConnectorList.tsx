import { useState } from "react";
import { api, describe } from "../api";
import { filterRows, rows, STATES } from "../filters";
import type { ExpandedConnectors } from "../types";
import { usePoll } from "../usePoll";
import { StateBadge } from "./StateBadge";

/** Connectors with their states; filter by state, search by name/class. */
export function ConnectorList({ writable }: { writable: boolean }) {
  const { data, error } = usePoll(() => api<ExpandedConnectors>("GET", "/connectors?expand=status&expand=info"), "connectors");
  const [states, setStates] = useState<Set<string>>(new Set());
  const [search, setSearch] = useState("");
  const all = data ? rows(data) : [];
  const shown = filterRows(all, states, search);
  const toggle = (s: string) => {
    const next = new Set(states);
    if (next.has(s)) next.delete(s);
    else next.add(s);
    setStates(next);
  };
  return (
    <div>
      <div className="toolbar">
        <h2>Connectors</h2>
        {writable ? (
          <a className="button primary" href="#/new">
            New connector
          </a>
        ) : null}
      </div>
      <div className="filters">
        <input
          type="search"
          aria-label="search connectors"
          placeholder="Search name or class"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
        />
        {STATES.map((s) => (
          <label key={s} className={`chip ${states.has(s) ? "on" : ""}`}>
            <input type="checkbox" checked={states.has(s)} onChange={() => toggle(s)} />
            {s} ({all.filter((r) => r.state === s || (s === "FAILED" && r.failedTasks > 0 && r.state !== "FAILED")).length})
          </label>
        ))}
      </div>
      {error ? <div className="error">{describe(error, "The connector list")}</div> : null}
      <table className="grid" data-testid="connector-list">
        <thead>
          <tr>
            <th>name</th>
            <th>type</th>
            <th>class</th>
            <th>state</th>
            <th>tasks running</th>
            <th>worker</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <tr key={r.name} data-connector={r.name}>
              <td>
                <a href={`#/connectors/${encodeURIComponent(r.name)}`}>{r.name}</a>
              </td>
              <td>{r.type}</td>
              <td className="muted">{r.connectorClass}</td>
              <td>
                <StateBadge state={r.state} />
              </td>
              <td>
                {r.tasksRunning}/{r.tasksTotal}
                {r.failedTasks ? <span className="error-text"> ({r.failedTasks} failed)</span> : null}
              </td>
              <td>{r.worker ?? "–"}</td>
            </tr>
          ))}
          {data && shown.length === 0 ? (
            <tr>
              <td colSpan={6} className="muted">
                {all.length ? "No connector matches." : "No connectors yet."}
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </div>
  );
}
