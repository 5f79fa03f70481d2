import { useState } from "react";
import { api, describe } from "../api";
import { filterRows, rows } from "../filters";
import { countsText, HEALTH_WORDS } from "../health";
import type { ConnectorsHealth, ExpandedConnectors } from "../types";
import { usePoll } from "../usePoll";
import { HealthBadge } from "./HealthBadge";
import { StateBadge } from "./StateBadge";
import { WorkerLabel } from "./WorkerLabel";

/** Connectors with their health (from their tasks), states and root causes; filter by health, search by name/class. */
export function ConnectorList({ writable }: { writable: boolean }) {
  const { data, error } = usePoll(() => api<ConnectorsHealth>("GET", "/raftconnect/v1/console/connectors"), "connectors-health");
  const info = usePoll(() => api<ExpandedConnectors>("GET", "/connectors?expand=info"), "connectors-info", 10000);
  const [healths, setHealths] = useState<Set<string>>(new Set());
  const [search, setSearch] = useState("");
  const classes = Object.fromEntries(
    Object.entries(info.data ?? {}).map(([name, e]) => [name, e.info?.config["connector.class"] ?? ""]),
  );
  const all = data ? rows(data.connectors, classes) : [];
  const shown = filterRows(all, healths, search);
  const toggle = (s: string) => {
    const next = new Set(healths);
    if (next.has(s)) next.delete(s);
    else next.add(s);
    setHealths(next);
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
        {HEALTH_WORDS.map((s) => (
          <label key={s} className={`chip ${healths.has(s) ? "on" : ""}`} data-chip={s}>
            <input type="checkbox" checked={healths.has(s)} onChange={() => toggle(s)} />
            {s} ({data?.health[s] ?? 0})
          </label>
        ))}
      </div>
      {error ? <div className="error">{describe(error, "The connector list")}</div> : null}
      <table className="grid" data-testid="connector-list">
        <thead>
          <tr>
            <th>name</th>
            <th>health</th>
            <th>state</th>
            <th>tasks</th>
            <th>type</th>
            <th>class</th>
            <th>worker</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => (
            <tr key={r.name} data-connector={r.name}>
              <td>
                <a href={`#/connectors/${encodeURIComponent(r.name)}`}>{r.name}</a>
              </td>
              <td>
                <HealthBadge health={r.health} />
              </td>
              <td>
                <StateBadge state={r.state} />
              </td>
              <td>
                <span data-testid="task-counts">
                  {r.tasksRunning}/{r.tasksTotal} running
                  {r.failedTasks ? <span className="error-text"> · {r.failedTasks} failed</span> : null}
                </span>
                {r.rootCause ? (
                  <div className="cause" data-testid="root-cause" title={countsText(r.counts)}>
                    {r.rootCause}
                  </div>
                ) : null}
              </td>
              <td>{r.type}</td>
              <td className="muted">{r.connectorClass}</td>
              <td>
                <WorkerLabel worker={r.worker} />
              </td>
            </tr>
          ))}
          {data && shown.length === 0 ? (
            <tr>
              <td colSpan={7} className="muted">
                {all.length ? "No connector matches." : "No connectors yet."}
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
    </div>
  );
}
