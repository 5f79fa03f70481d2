import { useEffect, useState } from "react";
import { api, ApiError, describe, enc } from "../api";
import { errorCount, errorsFromMessage, type FieldErrors } from "../configErrors";
import { loadDefinitions, loadRecommended, validateConfig } from "../plugins";
import { countsText } from "../health";
import { chartData } from "../series";
import { progress, resetBody, type ResetMode } from "../offsets";
import type {
  Config,
  ConfigKeyInfo,
  ConnectorHealth,
  ConnectorInfo,
  OffsetEntry,
  OffsetsView,
  SinkPartitionOffsets,
  TaskHistoryBody,
  TaskInfo,
  TaskMetric,
} from "../types";
import { usePoll } from "../usePoll";
import { ConfigForm } from "./ConfigForm";
import { ConfirmDialog } from "./ConfirmDialog";
import { ConnectorActions } from "./ConnectorActions";
import { HealthBadge } from "./HealthBadge";
import { StateBadge } from "./StateBadge";
import { TimeChart } from "./TimeChart";
import { TraceView } from "./TraceView";
import { WorkerLabel } from "./WorkerLabel";

interface Flash {
  kind: "ok" | "error";
  text: string;
}

/** One connector: state and actions, tasks with worker and trace, throughput, config, offsets, topics. */
export function ConnectorDetail({ name, writable }: { name: string; writable: boolean }) {
  const base = `/connectors/${enc(name)}`;
  const status = usePoll(() => api<ConnectorHealth>("GET", `/raftconnect/v1/console/connectors/${enc(name)}`), `health:${name}`);
  const info = usePoll(() => api<ConnectorInfo>("GET", base), `info:${name}`);
  const [flash, setFlash] = useState<Flash | null>(null);
  const refresh = () => {
    status.refresh();
    info.refresh();
  };
  const notFound = status.error instanceof ApiError && status.error.status === 404 && !status.error.unsupported;
  const st = status.data;
  return (
    <div>
      <div className="toolbar">
        <h2>
          <a href="#/connectors">Connectors</a> / {name}
        </h2>
        {st ? <span data-testid="connector-health"><HealthBadge health={st.health} /></span> : null}
        {st ? <span data-testid="connector-state"><StateBadge state={st.state} /></span> : null}
        <span className="muted">{st?.type}</span>
        <ConnectorActions
          name={name}
          state={st?.state}
          writable={writable && !notFound}
          onDone={(text) => {
            setFlash({ kind: "ok", text });
            refresh();
          }}
          onError={(text) => setFlash({ kind: "error", text })}
          onDeleted={() => {
            window.location.hash = "#/connectors";
          }}
        />
      </div>
      {flash ? (
        <div className={flash.kind === "ok" ? "notice" : "error"} role="status">
          {flash.text}
          <button type="button" className="link" onClick={() => setFlash(null)}>
            dismiss
          </button>
        </div>
      ) : null}
      {notFound ? <div className="error">Connector {name} does not exist (any more).</div> : null}
      {status.error && !notFound ? <div className="error">{describe(status.error, "The status")}</div> : null}
      {st ? (
        <div>
          <p className="muted">
            connector on <strong>{st.worker ? <WorkerLabel worker={st.worker} /> : "no worker"}</strong> · tasks:{" "}
            <span data-testid="detail-counts">{countsText(st.task_counts)}</span>
            {st.trace ? <TraceToggle label="connector trace" trace={st.trace} /> : null}
          </p>
          {st.root_cause && st.health !== "healthy" ? (
            <div className="cause" data-testid="detail-root-cause">
              {st.root_cause}
            </div>
          ) : null}
        </div>
      ) : null}
      {st ? <Tasks name={name} status={st} writable={writable} onFlash={setFlash} onChange={refresh} /> : null}
      {!notFound ? <Throughput name={name} /> : null}
      {info.data ? <ConfigSection name={name} info={info.data} writable={writable} onSaved={refresh} /> : null}
      {!notFound ? <Offsets name={name} state={st?.state} writable={writable} /> : null}
      {!notFound ? <Topics name={name} writable={writable} /> : null}
    </div>
  );
}

function TraceToggle({ label, trace }: { label: string; trace: string }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      {" "}
      <button type="button" className="link" onClick={() => setOpen(!open)} aria-expanded={open}>
        {open ? `hide ${label}` : `show ${label}`}
      </button>
      {open ? <TraceView trace={trace} /> : null}
    </>
  );
}

function Tasks(props: {
  name: string;
  status: ConnectorHealth;
  writable: boolean;
  onFlash: (f: Flash) => void;
  onChange: () => void;
}) {
  const { name, status, writable, onFlash, onChange } = props;
  const configs = usePoll(() => api<TaskInfo[]>("GET", `/connectors/${enc(name)}/tasks`), `tasks:${name}`, 10000);
  const [openTrace, setOpenTrace] = useState<number | null>(null);
  const restart = async (id: number) => {
    try {
      await api("POST", `/connectors/${enc(name)}/tasks/${id}/restart`);
      onFlash({ kind: "ok", text: `Restart of task ${id}: request accepted` });
      onChange();
    } catch (err) {
      onFlash({ kind: "error", text: describe(err, `Restarting task ${id}`) });
    }
  };
  return (
    <section>
      <h3>Tasks</h3>
      <table className="grid" data-testid="tasks">
        <thead>
          <tr>
            <th>task</th>
            <th>state</th>
            <th>worker</th>
            <th>cause · config</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {status.tasks.map((t) => {
            const cfg = configs.data?.find((c) => c.id.task === t.id)?.config;
            return (
              <tr key={t.id} data-task={t.id}>
                <td>{t.id}</td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td>
                  <WorkerLabel worker={t.worker} />
                </td>
                <td className="muted small">
                  {t.root_cause ? (
                    <div className="cause" data-testid="task-root-cause">
                      {t.root_cause}
                    </div>
                  ) : null}
                  {cfg
                    ? Object.entries(cfg)
                        .filter(([k]) => k !== "connector.class" && k !== "name")
                        .slice(0, 4)
                        .map(([k, v]) => `${k}=${v}`)
                        .join(", ")
                    : ""}
                </td>
                <td>
                  {t.trace ? (
                    <button type="button" className="link" onClick={() => setOpenTrace(openTrace === t.id ? null : t.id)}>
                      {openTrace === t.id ? "hide trace" : "show trace"}
                    </button>
                  ) : null}
                  {writable ? (
                    <button type="button" className="small" onClick={() => restart(t.id)}>
                      restart task
                    </button>
                  ) : null}
                </td>
              </tr>
            );
          })}
          {status.tasks.length === 0 ? (
            <tr>
              <td colSpan={5} className="muted">
                No tasks (yet).
              </td>
            </tr>
          ) : null}
        </tbody>
      </table>
      {openTrace !== null ? (
        <div data-testid="task-trace">
          <h4>Trace of task {openTrace}</h4>
          <TraceView trace={status.tasks.find((t) => t.id === openTrace)?.trace ?? "(no trace)"} />
        </div>
      ) : null}
    </section>
  );
}

function Throughput({ name }: { name: string }) {
  const metrics = usePoll(
    () => api<{ tasks: TaskMetric[]; records: number }>("GET", `/raftconnect/v1/connectors/${enc(name)}/metrics`),
    `metrics:${name}`,
  );
  const history = usePoll(
    () => api<TaskHistoryBody>("GET", `/raftconnect/v1/console/history?connector=${enc(name)}`),
    `history:${name}`,
    5000,
  );
  if (metrics.error instanceof ApiError && metrics.error.unsupported) return null;
  const byTask = (t: { task: number }) => `task ${t.task}`;
  const h = history.data;
  const rates = h ? chartData(h, "rate", byTask, true) : null;
  const lag = h ? chartData(h, "lag", byTask) : null;
  const errors = h ? chartData(h, "errors", byTask) : null;
  return (
    <section>
      <h3>Throughput</h3>
      {metrics.data ? (
        <table className="grid compact" data-testid="task-metrics">
          <thead>
            <tr>
              <th>task</th>
              <th>worker</th>
              <th>records</th>
              <th>batches</th>
              <th>records/s (30 s)</th>
              <th>last batch (s)</th>
              <th>lag (records)</th>
              <th>skipped (errors.tolerance)</th>
            </tr>
          </thead>
          <tbody>
            {metrics.data.tasks.map((m) => (
              <tr key={m.task}>
                <td>{m.task}</td>
                <td>
                  <WorkerLabel worker={m.worker ?? { node_id: null, rest_address: m.worker_id }} />
                </td>
                <td>{m.records}</td>
                <td>{m.batches}</td>
                <td>{m.records_per_second.toFixed(1)}</td>
                <td>{m.last_batch_seconds}</td>
                <td>{m.lag ?? "–"}</td>
                <td className={m.errors?.total_records_skipped ? "error-text" : undefined} data-testid="skipped">
                  {m.errors?.total_records_skipped ?? 0}
                </td>
              </tr>
            ))}
            {metrics.data.tasks.length === 0 ? (
              <tr>
                <td colSpan={8} className="muted">
                  No running task of this connector has reported yet.
                </td>
              </tr>
            ) : null}
          </tbody>
        </table>
      ) : null}
      {history.error ? <p className="muted">{describe(history.error, "The history")}</p> : null}
      {rates && rates.series.length ? (
        <>
          <h4>Records/s, last {Math.round((h?.keep_seconds ?? 900) / 60)} minutes</h4>
          <TimeChart data={rates} unit="records/s" testId="rate-chart" />
        </>
      ) : h ? (
        <p className="muted">No history yet: the node samples every {h.interval} s.</p>
      ) : null}
      {lag && lag.series.length ? (
        <>
          <h4>Lag</h4>
          <TimeChart data={lag} unit="records" height={140} testId="lag-chart" />
        </>
      ) : null}
      {errors && errors.series.some((s) => s.values.some((v) => v))? (
        <>
          <h4>Errors/s</h4>
          <TimeChart data={errors} unit="errors/s" height={140} testId="error-chart" />
        </>
      ) : null}
    </section>
  );
}

export function ConfigSection({ name, info, writable, onSaved }: { name: string; info: ConnectorInfo; writable: boolean; onSaved: () => void }) {
  const [editing, setEditing] = useState<Config | null>(null);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [note, setNote] = useState<string | null>(null);
  const [defs, setDefs] = useState<ConfigKeyInfo[] | null>(null);
  const [recommended, setRecommended] = useState<Record<string, string[]>>({});
  const plugin = info.config["connector.class"] ?? "";
  useEffect(() => {
    if (editing === null || !plugin) return;
    loadDefinitions(plugin).then(setDefs, () => setDefs(null));
    loadRecommended(plugin).then(setRecommended);
  }, [editing === null, plugin]);

  const validate = async (config: Config): Promise<boolean> => {
    const v = await validateConfig(config);
    setErrors(v.errors);
    setNote(v.checked ? (errorCount(v.errors) ? null : "The config is valid.") : "This node cannot validate configs; saving checks them.");
    return errorCount(v.errors) === 0;
  };
  const save = async () => {
    if (!editing) return;
    try {
      if (!(await validate(editing))) return;
      await api("PUT", `/connectors/${enc(name)}/config`, editing);
      setEditing(null);
      setErrors({});
      setNote("Saved.");
      onSaved();
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) setErrors(errorsFromMessage(err.message));
      else setNote(describe(err, "Saving the config"));
    }
  };
  return (
    <section>
      <div className="toolbar">
        <h3>Config</h3>
        {writable && editing === null ? (
          <button type="button" onClick={() => { setEditing({ ...info.config }); setErrors({}); setNote(null); }}>
            Edit config
          </button>
        ) : null}
        {editing !== null ? (
          <>
            <button type="button" onClick={() => validate(editing).catch((e) => setNote(describe(e)))}>
              Validate
            </button>
            <button type="button" className="primary" onClick={save}>
              Save config
            </button>
            <button type="button" onClick={() => { setEditing(null); setErrors({}); setNote(null); }}>
              Cancel
            </button>
          </>
        ) : null}
      </div>
      {note ? <div className="muted">{note}</div> : null}
      <ConfigForm
        config={editing ?? info.config}
        definitions={editing !== null ? defs : null}
        errors={errors}
        readOnly={editing === null}
        fixedKeys={["name"]}
        onChange={setEditing}
        recommended={recommended}
      />
    </section>
  );
}

/** A connector's offsets: a sink's lag per partition or a file's progress; reset and edit while STOPPED. */
export function Offsets({ name, state, writable }: { name: string; state: string | undefined; writable: boolean }) {
  const offsets = usePoll(() => api<{ offsets: OffsetEntry[] }>("GET", `/connectors/${enc(name)}/offsets`), `offsets:${name}`);
  const view = usePoll(() => api<OffsetsView>("GET", `/raftconnect/v1/console/connectors/${enc(name)}/offsets`), `offsets-view:${name}`, 5000);
  const [text, setText] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [confirmReset, setConfirmReset] = useState(false);
  const [resetting, setResetting] = useState(false);
  const stopped = state === "STOPPED";
  const editable = writable && stopped;
  const refresh = () => {
    offsets.refresh();
    view.refresh();
  };
  const patch = async (body: unknown, what: string) => {
    try {
      const resp = await api<{ message?: string } | null>("PATCH", `/connectors/${enc(name)}/offsets`, body);
      setMessage(resp?.message ?? `${what}: done.`);
      setText(null);
      setResetting(false);
      refresh();
    } catch (err) {
      setMessage(describe(err, what));
    }
  };
  const alter = async () => {
    if (text === null) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      setMessage(`Not valid JSON: ${err}`);
      return;
    }
    await patch(Array.isArray(parsed) ? { offsets: parsed } : parsed, "Altering offsets");
  };
  const reset = async () => {
    setConfirmReset(false);
    try {
      const resp = await api<{ message?: string } | null>("DELETE", `/connectors/${enc(name)}/offsets`);
      setMessage(resp?.message ?? "Offsets reset.");
      refresh();
    } catch (err) {
      setMessage(describe(err, "Resetting offsets"));
    }
  };
  const v = view.data;
  return (
    <section>
      <div className="toolbar">
        <h3>Offsets</h3>
        {editable && text === null ? (
          <>
            {v?.kind === "sink" ? (
              <button type="button" onClick={() => setResetting(true)}>
                Reset to…
              </button>
            ) : null}
            <button type="button" onClick={() => setText(JSON.stringify(offsets.data?.offsets ?? [], null, 2))}>
              Edit as JSON
            </button>
            <button type="button" className="danger" onClick={() => setConfirmReset(true)}>
              Delete offsets
            </button>
          </>
        ) : null}
        {writable && !stopped ? <span className="muted small">Stop the connector to change its offsets.</span> : null}
      </div>
      {message ? <div className="muted">{message}</div> : null}
      {view.error && !(view.error instanceof ApiError && view.error.unsupported) ? (
        <p className="muted">{describe(view.error, "The offsets view")}</p>
      ) : null}
      {text !== null ? (
        <div>
          <textarea aria-label="offsets JSON" rows={10} value={text} onChange={(e) => setText(e.target.value)} />
          <div>
            <button type="button" className="primary" onClick={alter}>
              Save offsets
            </button>
            <button type="button" onClick={() => setText(null)}>
              Cancel
            </button>
          </div>
        </div>
      ) : v?.kind === "sink" ? (
        <SinkOffsets rows={v.partitions} />
      ) : v?.kind === "source" ? (
        <table className="grid compact" data-testid="offsets">
          <thead>
            <tr>
              <th>file</th>
              <th>position</th>
              <th>size</th>
              <th>progress</th>
            </tr>
          </thead>
          <tbody>
            {v.partitions.map((p, i) => (
              <tr key={i}>
                <td>
                  <code>{String(p.partition.filename ?? JSON.stringify(p.partition))}</code>
                </td>
                <td>
                  {p.position ?? "–"} {p.unit}
                </td>
                <td>{p.size === null ? "–" : `${p.size} bytes`}</td>
                <td>{progress(p.position, p.size) ?? "–"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <table className="grid compact" data-testid="offsets">
          <thead>
            <tr>
              <th>partition</th>
              <th>offset</th>
            </tr>
          </thead>
          <tbody>
            {(offsets.data?.offsets ?? []).map((o, i) => (
              <tr key={i}>
                <td>
                  <code>{JSON.stringify(o.partition)}</code>
                </td>
                <td>
                  <code>{JSON.stringify(o.offset)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {offsets.data && offsets.data.offsets.length === 0 && v?.kind !== "sink" ? <p className="muted">No committed offsets.</p> : null}
      {resetting && v?.kind === "sink" ? (
        <ResetDialog name={name} rows={v.partitions} onCancel={() => setResetting(false)} onApply={(body) => patch(body, "Resetting offsets")} />
      ) : null}
      {confirmReset ? (
        <ConfirmDialog title={`Delete the offsets of ${name}?`} confirmLabel="Delete" danger onCancel={() => setConfirmReset(false)} onConfirm={reset}>
          <p>Its tasks will start from the beginning when it is resumed.</p>
        </ConfirmDialog>
      ) : null}
    </section>
  );
}

function SinkOffsets({ rows }: { rows: SinkPartitionOffsets[] }) {
  return (
    <table className="grid compact" data-testid="offsets">
      <thead>
        <tr>
          <th>topic</th>
          <th>partition</th>
          <th>committed</th>
          <th>start</th>
          <th>end</th>
          <th>lag</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((r) => (
          <tr key={`${r.topic}:${r.partition}`} data-partition={`${r.topic}:${r.partition}`}>
            <td>{r.topic}</td>
            <td>{r.partition}</td>
            <td>{r.committed ?? <span className="muted">none</span>}</td>
            <td>{r.start_offset ?? "?"}</td>
            <td>{r.end_offset ?? "?"}</td>
            <td data-testid="lag">{r.lag ?? "?"}</td>
          </tr>
        ))}
        {rows.length === 0 ? (
          <tr>
            <td colSpan={6} className="muted">
              No partitions (its topics do not exist yet).
            </td>
          </tr>
        ) : null}
      </tbody>
    </table>
  );
}

/** Choose earliest / latest / a timestamp / given offsets, see the offsets that will be written, then PATCH them. */
function ResetDialog(props: { name: string; rows: SinkPartitionOffsets[]; onCancel: () => void; onApply: (body: unknown) => void }) {
  const { name, onCancel, onApply } = props;
  const [mode, setMode] = useState<ResetMode>("earliest");
  const [when, setWhen] = useState("");
  const [given, setGiven] = useState<Record<string, string>>({});
  const [rows, setRows] = useState(props.rows);
  const [note, setNote] = useState<string | null>(null);
  useEffect(() => {
    if (mode !== "timestamp" || !when) return;
    const ms = new Date(when).getTime();
    if (Number.isNaN(ms)) return;
    api<OffsetsView>("GET", `/raftconnect/v1/console/connectors/${enc(name)}/offsets?timestamp=${ms}`).then(
      (v) => v.kind === "sink" && setRows(v.partitions),
      (err) => setNote(describe(err, "Finding the offsets for that time")),
    );
  }, [mode, when, name]);
  const body = resetBody(rows, mode, given);
  return (
    <ConfirmDialog title={`Reset the offsets of ${name}`} confirmLabel="Write these offsets" danger onCancel={onCancel} onConfirm={() => body && onApply(body)}>
      <div role="radiogroup" aria-label="reset to">
        {(["earliest", "latest", "timestamp", "offset"] as ResetMode[]).map((m) => (
          <label key={m} className="block">
            <input type="radio" name="reset-mode" value={m} checked={mode === m} onChange={() => setMode(m)} />{" "}
            {m === "earliest" ? "earliest (reprocess everything kept)" : m === "latest" ? "latest (skip everything written so far)" : m === "timestamp" ? "a time" : "given offsets"}
          </label>
        ))}
      </div>
      {mode === "timestamp" ? (
        <input type="datetime-local" aria-label="reset time" step="1" value={when} onChange={(e) => setWhen(e.target.value)} />
      ) : null}
      {note ? <div className="error">{note}</div> : null}
      <table className="grid compact" data-testid="reset-preview">
        <thead>
          <tr>
            <th>partition</th>
            <th>now</th>
            <th>will be</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const key = `${r.topic}:${r.partition}`;
            const target = body?.offsets.find((o) => o.partition.kafka_topic === r.topic && o.partition.kafka_partition === r.partition);
            return (
              <tr key={key}>
                <td>{key}</td>
                <td>{r.committed ?? "none"}</td>
                <td>
                  {mode === "offset" ? (
                    <input aria-label={`offset of ${key}`} size={8} value={given[key] ?? ""} onChange={(e) => setGiven({ ...given, [key]: e.target.value })} />
                  ) : (
                    (target?.offset.kafka_offset ?? "unchanged")
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {!body ? <p className="muted small">Nothing to write yet.</p> : <p className="small">The tasks start from these offsets when the connector is resumed.</p>}
    </ConfirmDialog>
  );
}

function Topics({ name, writable }: { name: string; writable: boolean }) {
  const topics = usePoll(() => api<Record<string, { topics: string[] }>>("GET", `/connectors/${enc(name)}/topics`), `topics:${name}`, 10000);
  const [message, setMessage] = useState<string | null>(null);
  const list = topics.data?.[name]?.topics;
  const reset = async () => {
    try {
      await api("PUT", `/connectors/${enc(name)}/topics/reset`);
      setMessage("Active topics reset.");
      topics.refresh();
    } catch (err) {
      setMessage(describe(err, "Resetting active topics"));
    }
  };
  return (
    <section>
      <div className="toolbar">
        <h3>Topics</h3>
        {writable && list ? (
          <button type="button" onClick={reset}>
            Reset active topics
          </button>
        ) : null}
      </div>
      {message ? <div className="muted">{message}</div> : null}
      {topics.error ? (
        <p className="muted">{describe(topics.error, "The active topics view")}</p>
      ) : list ? (
        <p data-testid="topics">{list.length ? list.join(", ") : "No active topics."}</p>
      ) : null}
    </section>
  );
}
