// Per-field errors of a connector config, from Connect's validate answer or, when a node has no
// validate endpoint, from the message of a refused PUT /connectors/{name}/config.

import type { ConfigInfos } from "./types";

export type FieldErrors = Record<string, string[]>;

/** {key: [messages]} for every key with errors in a ConfigInfos body. */
export function errorsFromValidation(infos: ConfigInfos): FieldErrors {
  const out: FieldErrors = {};
  for (const c of infos.configs ?? []) {
    if (c.value?.errors?.length) out[c.value.name] = [...c.value.errors];
  }
  return out;
}

const KEY_PATTERNS = [/configuration "([^"]+)"/, /for configuration ([\w.\-]+)/, /^([\w.\-]+):\s/];

/**
 * Split Connect's "Connector configuration is invalid and contains the following N error(s):" message
 * into per-key errors; lines naming no key go under "" (shown for the whole form).
 */
export function errorsFromMessage(message: string): FieldErrors {
  const out: FieldErrors = {};
  const lines = message.split("\n").map((l) => l.trim()).filter(Boolean);
  const listed = lines[0]?.startsWith("Connector configuration is invalid") ? lines.slice(1) : lines;
  for (const line of listed) {
    if (line.startsWith("You can also find the above list of errors")) continue;
    let key = "";
    for (const re of KEY_PATTERNS) {
      const m = re.exec(line);
      if (m) {
        key = m[1];
        break;
      }
    }
    (out[key] ??= []).push(line);
  }
  return out;
}

export function errorCount(errors: FieldErrors): number {
  return Object.values(errors).reduce((n, e) => n + e.length, 0);
}
