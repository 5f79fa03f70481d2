// Connector plugins' config keys and validation through Connect's plugin endpoints, with fallbacks for
// nodes that lack them (the console then relies on the errors of the create/update call itself).

import { api, ApiError, enc } from "./api";
import { errorsFromValidation, type FieldErrors } from "./configErrors";
import type { Config, ConfigInfos, ConfigKeyInfo } from "./types";

/** The plugin's config keys: GET /connector-plugins/{p}/config, else the definitions validate returns, else null. */
export async function loadDefinitions(pluginClass: string): Promise<ConfigKeyInfo[] | null> {
  try {
    return await api<ConfigKeyInfo[]>("GET", `/connector-plugins/${enc(pluginClass)}/config`);
  } catch (err) {
    if (!(err instanceof ApiError) || !err.unsupported) throw err;
  }
  try {
    const infos = await api<ConfigInfos>("PUT", `/connector-plugins/${enc(pluginClass)}/config/validate`, {
      "connector.class": pluginClass,
    });
    return infos.configs.map((c) => c.definition);
  } catch (err) {
    if (err instanceof ApiError && (err.unsupported || err.status === 400)) return null;
    throw err;
  }
}

export interface Validation {
  /** false when the node has no validate endpoint (nothing was checked) */
  checked: boolean;
  errors: FieldErrors;
}

/** PUT /connector-plugins/{p}/config/validate: per-field errors of a full config. */
export async function validateConfig(config: Config): Promise<Validation> {
  const plugin = config["connector.class"] ?? "";
  if (!plugin) return { checked: true, errors: { "connector.class": ["connector.class is required"] } };
  try {
    const infos = await api<ConfigInfos>("PUT", `/connector-plugins/${enc(plugin)}/config/validate`, config);
    return { checked: true, errors: errorsFromValidation(infos) };
  } catch (err) {
    if (err instanceof ApiError && err.unsupported) return { checked: false, errors: {} };
    throw err;
  }
}

/** Each key's allowed values (validate's recommended_values) for a plugin; {} when the node cannot say. */
export async function loadRecommended(pluginClass: string, config: Config = {}): Promise<Record<string, string[]>> {
  try {
    const infos = await api<ConfigInfos>("PUT", `/connector-plugins/${enc(pluginClass)}/config/validate`, {
      ...config,
      "connector.class": pluginClass,
    });
    return Object.fromEntries(
      infos.configs.filter((c) => c.value.recommended_values?.length).map((c) => [c.definition.name, c.value.recommended_values]),
    );
  } catch {
    return {};
  }
}

/**
 * A pasted Connect config: `{"name", "config": {...}}` (POST /connectors) or the flat form (PUT .../config,
 * `name` inside). Values become strings as Connect's are. Throws Error with a sentence when it is neither.
 */
export function parsePastedConfig(text: string): { name: string; config: Config } {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new Error(`Not valid JSON: ${(err as Error).message}`);
  }
  if (!data || typeof data !== "object" || Array.isArray(data)) throw new Error("Expected a JSON object");
  const obj = data as Record<string, unknown>;
  const nested = obj.config && typeof obj.config === "object" && !Array.isArray(obj.config);
  const raw = (nested ? obj.config : obj) as Record<string, unknown>;
  const config: Config = {};
  for (const [k, v] of Object.entries(raw)) {
    if (v === null || typeof v === "object") throw new Error(`The value of ${k} must be a string, number or boolean`);
    config[k] = String(v);
  }
  const name = String((nested ? obj.name : raw.name) ?? config.name ?? "");
  delete config.name;
  if (!config["connector.class"]) throw new Error("The config has no connector.class");
  return { name, config };
}
