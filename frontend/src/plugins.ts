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
