import { api, ApiError, describe } from "../api";
import { HEALTH_WORDS } from "../health";
import { chartData } from "../series";
import type { Assignment, ClusterView, ConnectorsHealth, KafkaCluster, StoreStatus, TaskHistoryBody } from "../types";
import { usePoll } from "../usePoll";
import { HealthBadge } from "./HealthBadge";
import { StateBadge } from "./StateBadge";
import { TimeChart } from "./TimeChart";

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
  const health = usePoll(() => api<ConnectorsHealth>("GET", "/raftconnect/v1/console/connectors"), "overview-health");
  const history = usePoll(() => optional(api<TaskHistoryBody>("GET", "/raftconnect/v1/console/history")), "history", 5000);
  const rates = history.data ? chartData(history.data, "rate") : null;

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
            <strong data-testid="leader" title={c.leader ? `Raft ${c.leader}` : undefined}>
              {c.leader ? (c.nodes.find((n) => n.raft_address === c.leader)?.id ?? c.leader) : "none"}
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
      <ConnectorCounts health={health.data} error={health.error} />
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
                <td>
                  <strong>{n.id}</strong>
                  {n.rest_address === window.location.host ? <span className="muted small"> (this console)</span> : null}
                </td>
                <td>{n.roles.join(", ")}</td>
                <td className="muted">{n.rest_address}</td>
                <td title="a live group session: the worker heartbeats the coordinator">
                  {n.roles.includes("worker") ? <StateBadge state={n.alive ? "ALIVE" : "NO SESSION"} /> : "–"}
                  {n.reassign_in_s != null ? (
                    <span className="muted small" data-testid="held">
                      {" "}its work waits for it: reassigned in {Math.ceil(n.reassign_in_s)} s
                    </span>
                  ) : null}
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
      <KafkaPanel />
      <h3>Throughput (records/s per connector, last 15 minutes)</h3>
      {history.error ? <div className="error">{describe(history.error, "The throughput history")}</div> : null}
      {rates && rates.series.length ? (
        <TimeChart data={rates} unit="records/s" testId="overview-chart" />
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

/** Connectors by health and tasks by state, from the server's health list. */
function ConnectorCounts({ health, error }: { health: ConnectorsHealth | undefined; error: unknown }) {
  if (error) return <div className="error">{describe(error, "The connector health")}</div>;
  if (!health) return null;
  const failing = health.connectors.filter((c) => c.health === "failed" || c.health === "degraded");
  return (
    <section>
      <div className="counts" data-testid="health-counts">
        {HEALTH_WORDS.map((w) => (
          <a key={w} className="count" href="#/connectors" data-count={w}>
            <HealthBadge health={w} /> <strong>{health.health[w] ?? 0}</strong>
            <span className="muted small">connectors</span>
          </a>
        ))}
        <div className="count" data-testid="task-totals">
          <span className="muted small">tasks</span>
          <strong>{Object.values(health.tasks).reduce((a, b) => a + b, 0)}</strong>
          <span className="small">
            {health.tasks.RUNNING ?? 0} running · <span className={health.tasks.FAILED ? "error-text" : undefined}>{health.tasks.FAILED ?? 0} failed</span>
          </span>
        </div>
      </div>
      {failing.length ? (
        <ul className="failing" data-testid="failing">
          {failing.map((c) => (
            <li key={c.name}>
              <HealthBadge health={c.health} /> <a href={`#/connectors/${encodeURIComponent(c.name)}`}>{c.name}</a>
              {c.root_cause ? <span className="cause"> — {c.root_cause}</span> : null}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}

/** The Kafka cluster this node uses: bootstrap servers, reachable brokers, topics with end offsets. */
function KafkaPanel() {
  const kafka = usePoll(() => optional(api<KafkaCluster>("GET", "/raftconnect/v1/console/kafka")), "kafka", 3000);
  const k = kafka.data;
  if (kafka.error) return <div className="error">{describe(kafka.error, "The Kafka view")}</div>;
  if (!k) return null;
  return (
    <section data-testid="kafka">
      <h3>
        Kafka <StateBadge state={k.state === "ok" ? "REACHABLE" : "UNREACHABLE"} />
      </h3>
      <p>
        <span className="muted">bootstrap servers</span> <code data-testid="bootstrap">{k.bootstrap_servers}</code>
        {k.state === "ok" ? (
          <>
            {" "}· <span className="muted">brokers</span>{" "}
            <span data-testid="brokers">{k.brokers.map((b) => `${b.id} (${b.host}:${b.port})`).join(", ")}</span> ·{" "}
            <span className="muted">cluster</span> {k.cluster_id ?? "–"} · {k.topic_count} topics
          </>
        ) : null}
      </p>
      {k.error ? (
        <div className="error" data-testid="kafka-error">
          {k.error}
        </div>
      ) : null}
      {k.topics.length ? (
        <table className="grid compact" data-testid="kafka-topics">
          <thead>
            <tr>
              <th>topic</th>
              <th>partitions</th>
              <th>end offsets (per partition)</th>
              <th>sum of end offsets</th>
            </tr>
          </thead>
          <tbody>
            {k.topics.map((t) => (
              <tr key={t.name} data-topic={t.name}>
                <td>{t.name}</td>
                <td>{t.partitions.length}</td>
                <td className="small">{t.partitions.map((p) => `${p.partition}: ${p.end_offset ?? "?"}`).join(" · ")}</td>
                <td>{t.partitions.reduce((a, p) => a + (p.end_offset ?? 0), 0)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
