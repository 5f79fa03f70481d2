import { useEffect, useState } from "react";
import { api, ApiError, describe } from "../api";
import { errorCount, errorsFromMessage, type FieldErrors } from "../configErrors";
import { loadDefinitions, loadRecommended, parsePastedConfig, validateConfig } from "../plugins";
import type { Config, ConfigKeyInfo, ConnectorInfo, PluginInfo } from "../types";
import { ConfigForm } from "./ConfigForm";

/**
 * Create a connector from a plugin's config form (or a pasted Connect config in JSON mode): validate
 * (per-field errors), then POST /connectors.
 */
export function CreateConnector() {
  const [plugins, setPlugins] = useState<PluginInfo[] | null>(null);
  const [plugin, setPlugin] = useState("");
  const [defs, setDefs] = useState<ConfigKeyInfo[] | null>(null);
  const [name, setName] = useState("");
  const [config, setConfig] = useState<Config>({});
  const [errors, setErrors] = useState<FieldErrors>({});
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [recommended, setRecommended] = useState<Record<string, string[]>>({});
  const [mode, setMode] = useState<"form" | "json">("form");
  const [json, setJson] = useState("");
  const [note, setNote] = useState<string | null>(null);
  const [pasted, setPasted] = useState<Config | null>(null);

  useEffect(() => {
    api<PluginInfo[]>("GET", "/connector-plugins").then(setPlugins, (e) => setMessage(describe(e, "Listing plugins")));
  }, []);
  useEffect(() => {
    if (!plugin) return;
    setConfig(pasted && pasted["connector.class"] === plugin ? pasted : { "connector.class": plugin, "tasks.max": "1" });
    setPasted(null);
    setErrors({});
    setDefs(null);
    loadDefinitions(plugin).then(setDefs, (e) => setMessage(describe(e, "Loading the plugin's config keys")));
    loadRecommended(plugin).then(setRecommended);
  }, [plugin]);

  /** JSON mode → form: a pasted {"name","config"} or flat config fills the form. */
  const usePasted = (): boolean => {
    try {
      const p = parsePastedConfig(json);
      setName(p.name);
      if (p.config["connector.class"] === plugin) setConfig(p.config);
      else {
        setPasted(p.config);
        setPlugin(p.config["connector.class"]);
      }
      setNote(null);
      setMode("form");
      return true;
    } catch (err) {
      setNote((err as Error).message);
      return false;
    }
  };
  const validate = async () => {
    setNote(null);
    try {
      const v = await validateConfig({ ...config, name: name.trim() });
      setErrors(v.errors);
      setNote(!v.checked ? "This node cannot validate configs; creating checks them." : errorCount(v.errors) ? `${errorCount(v.errors)} error(s): see the fields.` : "The config is valid.");
    } catch (err) {
      setNote(describe(err, "Validating"));
    }
  };

  const create = async () => {
    setBusy(true);
    setMessage(null);
    try {
      if (!name.trim()) {
        setErrors({ name: ["A connector needs a name"] });
        return;
      }
      const v = await validateConfig({ ...config, name: name.trim() });
      setErrors(v.errors);
      if (errorCount(v.errors)) return;
      const info = await api<ConnectorInfo>("POST", "/connectors", { name: name.trim(), config });
      window.location.hash = `#/connectors/${encodeURIComponent(info.name)}`;
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) setErrors(errorsFromMessage(err.message));
      else setMessage(describe(err, "Creating the connector"));
    } finally {
      setBusy(false);
    }
  };

  return (
    <div>
      <h2>New connector</h2>
      {message ? <div className="error">{message}</div> : null}
      <div className="tabs" role="tablist">
        <button type="button" role="tab" aria-selected={mode === "form"} className={mode === "form" ? "on" : undefined}
          onClick={() => (mode === "json" && json.trim() ? usePasted() : setMode("form"))}>
          Form
        </button>
        <button type="button" role="tab" aria-selected={mode === "json"} className={mode === "json" ? "on" : undefined}
          onClick={() => {
            setJson(JSON.stringify({ name, config }, null, 2));
            setMode("json");
          }}>
          JSON
        </button>
      </div>
      {note ? <div className="notice" role="status">{note}</div> : null}
      {mode === "json" ? (
        <div>
          <p className="muted small">
            Paste a Kafka Connect config: <code>{'{"name": ..., "config": {...}}'}</code> as for <code>POST /connectors</code>, or the
            flat form of <code>PUT /connectors/NAME/config</code> with <code>name</code> inside.
          </p>
          <textarea aria-label="connector JSON" rows={16} value={json} onChange={(e) => setJson(e.target.value)} />
          <button type="button" className="primary" onClick={usePasted}>
            Use this config
          </button>
        </div>
      ) : (
      <>
      <div className="form-row">
        <label htmlFor="plugin">Plugin</label>
        <select id="plugin" value={plugin} onChange={(e) => setPlugin(e.target.value)}>
          <option value="">choose a connector plugin…</option>
          {(plugins ?? []).map((p) => (
            <option key={p.class} value={p.class}>
              {p.class} ({p.type} {p.version})
            </option>
          ))}
        </select>
      </div>
      {plugin ? (
        <>
          <div className="form-row">
            <label htmlFor="connector-name">Name</label>
            <input id="connector-name" value={name} onChange={(e) => setName(e.target.value)} />
            {errors.name?.map((m, i) => (
              <div key={i} className="field-error" role="alert">
                {m}
              </div>
            ))}
          </div>
          <ConfigForm
            config={config}
            definitions={defs}
            errors={Object.fromEntries(Object.entries(errors).filter(([k]) => k !== "name"))}
            readOnly={false}
            fixedKeys={["connector.class"]}
            onChange={setConfig}
            recommended={recommended}
          />
          <div className="actions">
            <button type="button" disabled={busy} onClick={validate}>
              Validate
            </button>
            <button type="button" className="primary" disabled={busy} onClick={create}>
              Create
            </button>
            <a className="button" href="#/connectors">
              Cancel
            </a>
          </div>
        </>
      ) : null}
      </>
      )}
    </div>
  );
}
