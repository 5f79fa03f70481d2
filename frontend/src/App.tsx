import { useEffect, useState } from "react";
import { api, ApiError, setUnauthorizedHandler } from "./api";
import { ConnectionBanner } from "./components/ConnectionBanner";
import { ConnectorDetail } from "./components/ConnectorDetail";
import { ConnectorList } from "./components/ConnectorList";
import { CreateConnector } from "./components/CreateConnector";
import { Login } from "./components/Login";
import { Overview } from "./components/Overview";
import { canWrite, mainRole } from "./roles";
import { parseRoute, type Route } from "./route";
import type { WhoAmI } from "./types";
import { POLL_MS } from "./usePoll";
import { useConnection } from "./connection";

export function App() {
  const [user, setUser] = useState<WhoAmI | null | undefined>(undefined);
  const [route, setRoute] = useState<Route>(parseRoute(window.location.hash));
  const [startError, setStartError] = useState<string | null>(null);
  const conn = useConnection();

  useEffect(() => {
    setUnauthorizedHandler(() => setUser(null));
    let retry: ReturnType<typeof setTimeout> | undefined;
    const ask = () =>
      api<WhoAmI>("GET", "/raftconnect/v1/whoami").then(
        (u) => {
          setStartError(null);
          setUser(u);
        },
        (err) => {
          if (err instanceof ApiError && err.status === 401) {
            setStartError(null);
            setUser(null);
          } else if (err instanceof ApiError && err.status === 403) {
            setStartError(`${err.message}. Ask an admin for a role (Django groups viewer, operator, admin).`);
          } else {
            setStartError(`The node did not answer (${err}); retrying…`); // e.g. 503 while it starts
            retry = setTimeout(ask, POLL_MS);
          }
        },
      );
    void ask();
    const onHash = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener("hashchange", onHash);
    return () => {
      clearTimeout(retry);
      window.removeEventListener("hashchange", onHash);
    };
  }, []);

  if (startError)
    return (
      <div className="error">
        {startError}{" "}
        <button type="button" className="link" onClick={() => api("DELETE", "/raftconnect/v1/session").finally(() => window.location.reload())}>
          Log out
        </button>
      </div>
    );
  if (user === undefined) return <div className="muted">Loading…</div>;
  if (user === null) return <Login onLogin={setUser} />;

  const lost = conn.lostSince !== null;
  const writable = canWrite(user);
  const logout = async () => {
    await api("DELETE", "/raftconnect/v1/session").catch(() => null);
    setUser(null);
  };
  const tab = (href: string, label: string, active: boolean) => (
    <a href={href} className={active ? "active" : undefined}>
      {label}
    </a>
  );
  return (
    <div className="app">
      <header>
        <strong className="brand">RaftConnect</strong>
        <nav>
          {tab("#/", "Cluster", route.page === "overview")}
          {tab("#/connectors", "Connectors", route.page === "connectors" || route.page === "connector")}
          {writable ? tab("#/new", "New connector", route.page === "new") : null}
          {user.is_staff || user.is_superuser ? <a href="/admin/">Admin ↗</a> : null}
        </nav>
        <span className="user" data-testid="user">
          {user.username} <span className="badge">{mainRole(user)}</span>
          <button type="button" className="link" onClick={logout}>
            Log out
          </button>
        </span>
      </header>
      <ConnectionBanner />
      <main className={lost ? "stale" : undefined} data-stale={lost ? "true" : undefined}>
        {/* a disabled fieldset disables every button and input inside: no action while the node is lost */}
        <fieldset className="plain" disabled={lost} data-testid="actions-scope">
        {route.page === "overview" ? <Overview /> : null}
        {route.page === "connectors" ? <ConnectorList writable={writable} /> : null}
        {route.page === "new" ? (writable ? <CreateConnector /> : <div className="error">Viewers cannot create connectors.</div>) : null}
        {route.page === "connector" ? <ConnectorDetail key={route.name} name={route.name} writable={writable} /> : null}
        </fieldset>
      </main>
    </div>
  );
}
