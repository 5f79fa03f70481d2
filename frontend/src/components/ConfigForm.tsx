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
  /** a key's allowed values (validate's recommended_values): shown as a select */
  recommended?: Record<string, string[]>;
}

const IMPORTANCE = { HIGH: 0, MEDIUM: 1, LOW: 2 } as Record<string, number>;

/**
 * A connector config as a form: the plugin's keys first (required and important ones on top, defaults as
 * placeholders), then any other key set; each field shows its errors. Values are Connect's strings.
 */
export function ConfigForm({ config, definitions, errors, readOnly, onChange, fixedKeys = [], recommended = {} }: Props) {
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
          {def ? (
            <div className="muted small">
              {def.type.toLowerCase()}
              {def.required ? " · required" : ""}
            </div>
          ) : null}
        </th>
        <td>
          <ConfigInput
            id={`cfg-${key}`}
            name={key}
            def={def}
            value={config[key]}
            options={recommended[key] ?? []}
            readOnly={fixed}
            onChange={(v) => set(key, v === "" && def ? undefined : v)}
          />
          {def?.documentation && !readOnly ? <div className="doc muted small">{def.documentation}</div> : null}
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

/** Input of one key by its ConfigDef: a toggle for BOOLEAN, a select when allowed values are known, else text. */
export function ConfigInput(props: {
  id: string;
  name: string;
  def?: ConfigKeyInfo;
  value: string | undefined;
  options: string[];
  readOnly: boolean;
  onChange: (value: string) => void;
}) {
  const { id, name, def, value, options, readOnly, onChange } = props;
  const fallback = def?.default_value ?? "";
  if (def?.type === "BOOLEAN") {
    const on = (value ?? fallback).toLowerCase() === "true";
    return (
      <label className="toggle">
        <input id={id} name={name} type="checkbox" role="switch" checked={on} disabled={readOnly} onChange={(e) => onChange(String(e.target.checked))} />{" "}
        {on ? "true" : "false"}
        {value === undefined && def.default_value !== null ? <span className="muted small"> (default)</span> : null}
      </label>
    );
  }
  if (options.length && !readOnly) {
    const known = value === undefined || value === "" || options.includes(value);
    return (
      <select id={id} name={name} value={value ?? ""} onChange={(e) => onChange(e.target.value)}>
        <option value="">{fallback ? `default (${fallback})` : "not set"}</option>
        {options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
        {!known ? <option value={value}>{value}</option> : null}
      </select>
    );
  }
  return (
    <input
      id={id}
      name={name}
      type={def?.type === "PASSWORD" ? "password" : "text"}
      value={value ?? ""}
      placeholder={fallback}
      readOnly={readOnly}
      onChange={(e) => onChange(e.target.value)}
    />
  );
}
