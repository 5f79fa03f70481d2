import { useState } from "react";
import { api, describe, enc } from "../api";
import { ConfirmDialog } from "./ConfirmDialog";

interface Props {
  name: string;
  state: string | undefined;
  writable: boolean;
  onDone: (message: string) => void;
  onError: (message: string) => void;
  onDeleted: () => void;
}

type Pending = "stop" | "restart" | "delete" | null;

/** Pause, resume, stop, restart (includeTasks / onlyFailed), delete — none of them for viewers. */
export function ConnectorActions({ name, state, writable, onDone, onError, onDeleted }: Props) {
  const [pending, setPending] = useState<Pending>(null);
  const [includeTasks, setIncludeTasks] = useState(true);
  const [onlyFailed, setOnlyFailed] = useState(false);
  const [busy, setBusy] = useState(false);
  if (!writable) return null;

  const run = async (what: string, method: string, path: string, after?: () => void) => {
    setPending(null);
    setBusy(true);
    try {
      await api(method, path);
      onDone(`${what}: request accepted`);
      after?.();
    } catch (err) {
      onError(describe(err, what));
    } finally {
      setBusy(false);
    }
  };
  const base = `/connectors/${enc(name)}`;
  return (
    <div className="actions" data-testid="connector-actions">
      {state === "PAUSED" || state === "STOPPED" ? (
        <button type="button" disabled={busy} onClick={() => run("Resume", "PUT", `${base}/resume`)}>
          Resume
        </button>
      ) : (
        <button type="button" disabled={busy} onClick={() => run("Pause", "PUT", `${base}/pause`)}>
          Pause
        </button>
      )}
      <button type="button" disabled={busy || state === "STOPPED"} onClick={() => setPending("stop")}>
        Stop
      </button>
      <button type="button" disabled={busy} onClick={() => setPending("restart")}>
        Restart…
      </button>
      <button type="button" className="danger" disabled={busy} onClick={() => setPending("delete")}>
        Delete
      </button>
      {pending === "stop" ? (
        <ConfirmDialog
          title={`Stop ${name}?`}
          confirmLabel="Stop"
          danger
          onCancel={() => setPending(null)}
          onConfirm={() => run("Stop", "PUT", `${base}/stop`)}
        >
          <p>Its tasks are shut down and release their resources; offsets can then be edited. Resume starts it again.</p>
        </ConfirmDialog>
      ) : null}
      {pending === "restart" ? (
        <ConfirmDialog
          title={`Restart ${name}?`}
          confirmLabel="Restart"
          onCancel={() => setPending(null)}
          onConfirm={() =>
            run("Restart", "POST", `${base}/restart?includeTasks=${includeTasks}&onlyFailed=${onlyFailed}`)
          }
        >
          <label className="block">
            <input type="checkbox" checked={includeTasks} onChange={(e) => setIncludeTasks(e.target.checked)} /> include
            tasks (<code>includeTasks</code>)
          </label>
          <label className="block">
            <input type="checkbox" checked={onlyFailed} onChange={(e) => setOnlyFailed(e.target.checked)} /> only failed
            instances (<code>onlyFailed</code>)
          </label>
        </ConfirmDialog>
      ) : null}
      {pending === "delete" ? (
        <ConfirmDialog
          title={`Delete ${name}?`}
          confirmLabel="Delete"
          danger
          onCancel={() => setPending(null)}
          onConfirm={() => run("Delete", "DELETE", base, onDeleted)}
        >
          <p>The connector and its tasks stop and its config is removed. Its committed offsets are kept.</p>
        </ConfirmDialog>
      ) : null}
    </div>
  );
}
