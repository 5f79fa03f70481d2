import { useState } from "react";
import { api, ApiError, describe } from "../api";
import type { WhoAmI } from "../types";

/** Username and password form: POST /raftconnect/v1/session (Django session, CSRF token from whoami's cookie). */
export function Login({ onLogin }: { onLogin: (user: WhoAmI) => void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (!document.cookie.includes("csrftoken=")) await api("GET", "/raftconnect/v1/whoami").catch(() => null);
      onLogin(await api<WhoAmI>("POST", "/raftconnect/v1/session", { username, password }));
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? "Wrong username or password." : describe(err, "Login"));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="login" onSubmit={submit}>
      <h1>RaftConnect</h1>
      <label htmlFor="username">Username</label>
      <input id="username" autoComplete="username" value={username} onChange={(e) => setUsername(e.target.value)} autoFocus />
      <label htmlFor="password">Password</label>
      <input id="password" type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} />
      {error ? <div className="error" role="alert">{error}</div> : null}
      <button type="submit" className="primary" disabled={busy}>
        Log in
      </button>
    </form>
  );
}
