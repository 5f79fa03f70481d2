import { useState } from "react";
import type { FieldErrors } from "../configErrors";
import type { Config, ConfigKeyInfo } from "../types";

interface Props {
  config: Config;
  definitions: ConfigKeyInfo[] | null;
  errors: FieldErrors;
  readOnly: boolean;
  onChange: (config: Config) => void;
  /** keys that may not be edited here (e.g. name on an existing connector) */
  fixedKeys?: string[];
}

const IMPORTANCE = { HIGH: 0, MEDIUM: 1, LOW: 2 } as Record<string, number>;

/**
 * A connector config as a form: the plugin's keys first (required and important ones on top, defaults as
 * placeholders), then any other key set; each field shows its errors. Values are Connect's strings.
 */
export function ConfigForm({ config, definitions, errors, readOnly, onChange, fixedKeys = [] }: Props) {
  const [newKey, setNewKey] = useState("");
  const defs = [...(definitions ?? [])].sort(
    (a, b) => Number(b.required) - Number(a.required) || (IMPORTANCE[a.importance] ?? 3) - (IMPORTANCE[b.importance] ?? 3),
  );
  const defined = new Set(defs.map((d) => d.name));
  const extra = Object.keys(config).filter((k) => !defined.has(k)).sort((a, b) =>
    a === "connector.class" ? -1 : b === "connector.class" ? 1 : a.localeCompare(b),
  );
  const set = (key: string, value: string | undefined) => {
    const next = { ...config };
    if (value === undefined) delete next[key];
    else next[key] = value;
    onChange(next);
  };
  const row = (key: string, def?: ConfigKeyInfo) => {
    const errs = errors[key] ?? [];
    const fixed = readOnly || fixedKeys.includes(key);
    return (
      <tr key={key} className={errs.length ? "has-error" : undefined} data-key={key}>
        <th title={def?.documentation || undefined}>
          <label htmlFor={`cfg-${key}`}>
            {key}
            {def?.required ? <span className="required">*</span> : null}
          </label>
          {def ? <div className="muted small">{def.type.toLowerCase()}</div> : null}
        </th>
        <td>
          <input
            id={`cfg-${key}`}
            name={key}
            value={config[key] ?? ""}
            placeholder={def?.default_value ?? ""}
            readOnly={fixed}
            onChange={(e) => set(key, e.target.value === "" && def ? undefined : e.target.value)}
          />
          {errs.map((m, i) => (
            <div key={i} className="field-error" role="alert">
              {m}
            </div>
          ))}
        </td>
        <td>
          {!fixed && !def ? (
            <button type="button" className="link" aria-label={`remove ${key}`} onClick={() => set(key, undefined)}>
              ×
            </button>
          ) : null}
        </td>
      </tr>
    );
  };
  // errors of the whole form, and of keys that have no row (not set, not a known key of the plugin)
  const shown = new Set([...extra, ...defs.map((d) => d.name)]);
  const general = Object.entries(errors).filter(([k, e]) => !shown.has(k) && e.length);
  return (
    <div className="config-form">
      {general.length ? (
        <div className="error" role="alert">
          {general.flatMap(([k, errs]) => errs.map((m, i) => <div key={`${k}-${i}`}>{k ? `${k}: ${m}` : m}</div>))}
        </div>
      ) : null}
      <table className="form-table">
        <tbody>
          {extra.map((k) => row(k))}
          {defs.map((d) => row(d.name, d))}
        </tbody>
      </table>
      {!readOnly ? (
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault();
            const k = newKey.trim();
            if (k && !(k in config)) set(k, "");
            setNewKey("");
          }}
        >
          <input aria-label="new config key" placeholder="another.config.key" value={newKey} onChange={(e) => setNewKey(e.target.value)} />
          <button type="submit">Add key</button>
        </form>
      ) : null}
    </div>
  );
}
