import { useRef, useState } from "react";
import { api, ApiError, describe } from "../api";
import { History, RateTracker } from "../rates";
import type { Assignment, ClusterView, StoreStatus, TaskMetric } from "../types";
import { usePoll } from "../usePoll";
import { StateBadge } from "./StateBadge";
import { ThroughputChart } from "./ThroughputChart";

async function optional<T>(p: Promise<T>): Promise<T | null> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 405)) return null;
    throw err;
  }
}

/** Cluster overview: Raft and the group per node, the assignment generation, the metadata store, throughput. */
export function Overview() {
  const cluster = usePoll(() => api<ClusterView>("GET", "/raftconnect/v1/cluster"), "cluster");
  const assignment = usePoll(() => api<Assignment>("GET", "/raftconnect/v1/assignment"), "assignment");
  const store = usePoll(() => optional(api<StoreStatus>("GET", "/raftconnect/v1/metadata-store")), "store");
  const tracker = useRef(new RateTracker());
  const history = useRef(new History());
  const [version, setVersion] = useState(0);
  usePoll(async () => {
    const body = await optional(api<{ tasks: TaskMetric[] }>("GET", "/raftconnect/v1/task-metrics"));
    const t = Date.now() / 1000;
    const totals: Record<string, number> = {};
    const keys = new Set<string>();
    for (const m of body?.tasks ?? []) {
      const key = `${m.connector}-${m.task}`;
      keys.add(key);
      tracker.current.add(key, t, m.records);
      const r = tracker.current.rate(key);
      if (r !== null) totals[m.connector] = (totals[m.connector] ?? 0) + r;
    }
    tracker.current.retain(keys);
    history.current.push(t, totals);
    setVersion((v) => v + 1);
    return body;
  }, "task-metrics");

  const c = cluster.data;
  const a = assignment.data;
  const s = store.data;
  return (
    <div>
      <h2>Cluster</h2>
      {cluster.error ? <div className="error">{describe(cluster.error, "The cluster view")}</div> : null}
      {c ? (
        <div className="facts" data-testid="cluster-facts">
          <div>
            <span className="muted">leader</span>{" "}
            <strong data-testid="leader">
              {c.leader ? (c.nodes.find((n) => n.raft_address === c.leader)?.id ?? "") + ` (${c.leader})` : "none"}
            </strong>
          </div>
          <div>
            <span className="muted">term</span> <strong>{c.raft.term}</strong>
          </div>
          <div>
            <span className="muted">generation</span> <strong data-testid="generation">{a?.generation ?? c.generation}</strong>
          </div>
          <div>
            <span className="muted">epoch</span> <strong>{a?.epoch ?? c.epoch ?? "–"}</strong>
          </div>
          <div>
            <span className="muted">metadata store</span> <strong data-testid="active-store">{s?.active ?? c.metadata_store}</strong>
          </div>
          <div>
            <span className="muted">answered by</span> <strong>{c.node_id}</strong>
          </div>
        </div>
      ) : null}
      {s?.switch && !["completed", "aborted"].includes(s.switch.phase) ? (
        <div className="notice" data-testid="store-switch">
          Switching metadata store {s.switch.source} → {s.switch.target}: phase <strong>{s.switch.phase}</strong>
          {Object.keys(s.switch.progress ?? {}).length ? <code> {JSON.stringify(s.switch.progress)}</code> : null}
        </div>
      ) : s?.switch ? (
        <div className="muted small">
          Last switch {s.switch.source} → {s.switch.target}: {s.switch.phase}
          {s.switch.error ? ` (${s.switch.error})` : ""}
        </div>
      ) : null}
      {c ? (
        <table className="grid" data-testid="nodes">
          <thead>
            <tr>
              <th>node</th>
              <th>roles</th>
              <th>REST</th>
              <th>alive</th>
              <th>Raft</th>
              <th>term</th>
              <th>commit</th>
              <th>applied</th>
              <th>lag</th>
              <th>weight</th>
              <th>connectors</th>
              <th>tasks (running)</th>
            </tr>
          </thead>
          <tbody>
            {c.nodes.map((n) => (
              <tr key={n.id} data-node={n.id}>
                <td>{n.id}</td>
                <td>{n.roles.join(", ")}</td>
                <td>{n.rest_address}</td>
                <td title="a live group session: the worker heartbeats the coordinator">
                  {n.roles.includes("worker") ? <StateBadge state={n.alive ? "ALIVE" : "NO SESSION"} /> : "–"}
                </td>
                <td>{n.raft ? <StateBadge state={n.raft.state} /> : "–"}</td>
                <td>{n.raft?.term ?? "–"}</td>
                <td>{n.raft?.commit_index ?? "–"}</td>
                <td>{n.raft?.applied_index ?? "–"}</td>
                <td>{n.raft_lag ?? "–"}</td>
                <td>{n.weight}</td>
                <td>{n.connectors.length}</td>
                <td title={n.tasks.join(", ")}>
                  {n.tasks.length} ({n.running_tasks.length})
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <h3>Throughput (records/s per connector)</h3>
      {history.current.names().length ? (
        <ThroughputChart history={history.current} version={version} />
      ) : (
        <p className="muted">No task has reported records yet.</p>
      )}
      {s ? (
        <>
          <h3>Metadata stores</h3>
          <table className="grid">
            <tbody>
              {s.stores.map((st) => (
                <tr key={st.name}>
                  <td>{st.name}</td>
                  <td>{st.backend ?? "–"}</td>
                  <td className="muted">{st.url ?? ""}</td>
                  <td>{st.active ? <StateBadge state="ACTIVE" /> : null}</td>
                  <td className="error-text">{st.error ?? ""}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p className="muted small">
            Switching stores, users and groups are in the <a href="/admin/">Django admin</a> (
            <a href="/admin/metadata-store/">metadata store page</a>).
          </p>
        </>
      ) : null}
    </div>
  );
}
