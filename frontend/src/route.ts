export type Route =
  | { page: "overview" }
  | { page: "connectors" }
  | { page: "new" }
  | { page: "connector"; name: string };

/** The page named by the URL's hash (#/, #/connectors, #/connectors/{name}, #/new); hashes need no server routes. */
export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#\/?/, "");
  if (path === "connectors") return { page: "connectors" };
  if (path === "new") return { page: "new" };
  const m = /^connectors\/(.+)$/.exec(path);
  if (m) return { page: "connector", name: decodeURIComponent(m[1]) };
  return { page: "overview" };
}
