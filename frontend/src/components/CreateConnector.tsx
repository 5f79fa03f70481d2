import { useEffect, useState } from "react";
import { api, ApiError, describe } from "../api";
import { errorCount, errorsFromMessage, type FieldErrors } from "../configErrors";
import { loadDefinitions, validateConfig } from "../plugins";
import type { Config, ConfigKeyInfo, ConnectorInfo, PluginInfo } from "../types";
import { ConfigForm } from "./ConfigForm";

/** Create a connector from a plugin's config form: validate (per-field errors), then POST /connectors. */
export function CreateConnector() {
  const [plugins, setPlugins] = useState<PluginInfo[] | null>(null);
  const [plugin, setPlugin] = useState("");
  const [defs, setDefs] = useState<ConfigKeyInfo[] | null>(null);
  const [name, setName] = useState("");
  const [config, setConfig] = useState<Config>({});
  const [errors, setErrors] = useState<FieldErrors>({});
  const [message, setMessage] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    api<PluginInfo[]>("GET", "/connector-plugins").then(setPlugins, (e) => setMessage(describe(e, "Listing plugins")));
  }, []);
  useEffect(() => {
    if (!plugin) return;
    setConfig({ "connector.class": plugin, "tasks.max": "1" });
    setErrors({});
    setDefs(null);
    loadDefinitions(plugin).then(setDefs, (e) => setMessage(describe(e, "Loading the plugin's config keys")));
  }, [plugin]);

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
          />
          <div className="actions">
            <button type="button" className="primary" disabled={busy} onClick={create}>
              Create
            </button>
            <a className="button" href="#/connectors">
              Cancel
            </a>
          </div>
        </>
      ) : null}
    </div>
  );
}
