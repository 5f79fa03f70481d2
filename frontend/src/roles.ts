import type { WhoAmI } from "./types";

/** Whether the user may change connectors (operator or admin); viewers only read. */
export function canWrite(user: WhoAmI | null): boolean {
  return !!user && (user.is_superuser || user.roles.includes("operator") || user.roles.includes("admin"));
}

/** The strongest role, for display. */
export function mainRole(user: WhoAmI): string {
  for (const r of ["admin", "operator", "viewer"]) if (user.roles.includes(r)) return r;
  return user.roles[0] ?? "no role";
}
