// Whether the node serving this console still answers, when it last did, and where else to go.
//
// Every REST call reports to `connection` (api.ts): a response of any status means the node is
// there; a network failure (fetch rejects: connection refused, reset, DNS) means it is lost. The
// console then greys out what it can no longer vouch for and disables actions (`useConnection`),
// and looks for another node of the cluster it learnt from /raftconnect/v1/cluster.

import { useSyncExternalStore } from "react";

export interface KnownNode {
  id: string;
  rest_address: string | null;
}

export interface ConnectionState {
  /** ms since the epoch of the last answer from the node (null before the first) */
  lastOk: number | null;
  /** ms since the epoch of the first failure of the current outage (null while connected) */
  lostSince: number | null;
  /** what failed, for the banner */
  lostReason: string | null;
  /** this console's node id, when its REST address is the page's host */
  selfId: string | null;
  /** the cluster's nodes as last seen */
  nodes: KnownNode[];
}

type Listener = () => void;

/** The connection's state and its changes (an external store for React's useSyncExternalStore). */
export class Connection {
  private state: ConnectionState = { lastOk: null, lostSince: null, lostReason: null, selfId: null, nodes: [] };
  private listeners = new Set<Listener>();

  constructor(private now: () => number = Date.now) {}

  get snapshot(): ConnectionState {
    return this.state;
  }

  subscribe = (fn: Listener): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };

  private set(next: Partial<ConnectionState>): void {
    this.state = { ...this.state, ...next };
    for (const fn of [...this.listeners]) fn();
  }

  /** The node answered (any HTTP status). */
  ok(): void {
    this.set({ lastOk: this.now(), lostSince: null, lostReason: null });
  }

  /** A request could not reach the node. */
  failed(reason: string): void {
    if (this.state.lostSince === null) this.set({ lostSince: this.now(), lostReason: reason });
  }

  /**
   * The cluster's nodes (from GET /raftconnect/v1/cluster). This console's node is the one whose REST
   * address is the page's host (the cluster view is answered by the leader, so its node_id is not ours).
   */
  learn(nodes: KnownNode[], host: string = window.location.host): void {
    const selfId = nodes.find((n) => n.rest_address === host)?.id ?? null;
    const same =
      selfId === this.state.selfId &&
      nodes.length === this.state.nodes.length &&
      nodes.every((n, i) => n.id === this.state.nodes[i].id && n.rest_address === this.state.nodes[i].rest_address);
    if (!same) this.set({ selfId, nodes: nodes.map((n) => ({ id: n.id, rest_address: n.rest_address })) });
  }

  /** Other nodes with a REST address, to fail over to. */
  others(): KnownNode[] {
    return this.state.nodes.filter((n) => n.id !== this.state.selfId && n.rest_address && n.rest_address !== window.location.host);
  }
}

export const connection = new Connection();

/** The connection's state, re-rendering on change. */
export function useConnection(): ConnectionState {
  return useSyncExternalStore(connection.subscribe, () => connection.snapshot);
}

/** A user-facing sentence for a fetch that did not reach the node (never the raw `TypeError: Failed to fetch`). */
export function unreachableMessage(host: string, err: unknown): string {
  const detail = err instanceof Error && err.message && !/failed to fetch|networkerror|load failed/i.test(err.message) ? `: ${err.message}` : "";
  return `The node at ${host} does not answer (connection lost${detail})`;
}

/**
 * The first of `candidates` whose /health answers, probed in order with `probe`; null if none does.
 * The console is same-origin, so another node is probed with a no-cors request: it resolves when
 * the node answers at all and rejects when nothing listens there.
 */
export async function findLiveNode(
  candidates: KnownNode[],
  probe: (url: string) => Promise<unknown> = (url) => fetch(url, { mode: "no-cors", cache: "no-store" }),
): Promise<KnownNode | null> {
  for (const n of candidates) {
    try {
      await probe(`${window.location.protocol}//${n.rest_address}/health`);
      return n;
    } catch {
      // next one
    }
  }
  return null;
}

/** The console's URL on `node`, keeping the current page (hash). */
export function consoleUrlOn(node: KnownNode, hash: string = window.location.hash): string {
  return `${window.location.protocol}//${node.rest_address}/console/${hash}`;
}

/** "12:04:31" (local time) of a ms timestamp. */
export function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}
