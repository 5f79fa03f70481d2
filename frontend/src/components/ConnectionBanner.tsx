import { useEffect, useState } from "react";
import { api } from "../api";
import { clock, connection, consoleUrlOn, findLiveNode, useConnection, type KnownNode } from "../connection";
import type { ClusterView } from "../types";
import { usePoll } from "../usePoll";

/** Seconds the console waits on a reachable other node before moving there. */
export const FAILOVER_DELAY_S = 5;

/**
 * "Last updated" while the node answers; when it stops answering: since when, that what is shown
 * is as of then, and another node of the cluster to continue on (moving there by itself after
 * FAILOVER_DELAY_S unless the user stays). Learns the cluster's nodes every 5 s.
 */
export function ConnectionBanner({ navigate = (url: string) => window.location.assign(url) }: { navigate?: (url: string) => void }) {
  const conn = useConnection();
  usePoll(async () => {
    const c = await api<ClusterView>("GET", "/raftconnect/v1/cluster");
    connection.learn(c.nodes);
    return c;
  }, "cluster-nodes", 5000);
  const [target, setTarget] = useState<KnownNode | null>(null);
  const [searched, setSearched] = useState(false);
  const [countdown, setCountdown] = useState<number | null>(null);
  const lost = conn.lostSince !== null;

  useEffect(() => {
    setTarget(null);
    setSearched(false);
    setCountdown(null);
    if (!lost) return;
    let alive = true;
    const search = async () => {
      const found = await findLiveNode(connection.others());
      if (!alive) return;
      setSearched(true);
      if (found) {
        setTarget(found);
        setCountdown(FAILOVER_DELAY_S);
      } else timer = setTimeout(search, 3000);
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    void search();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [lost]);

  useEffect(() => {
    if (countdown === null || !target) return;
    if (countdown <= 0) {
      navigate(consoleUrlOn(target));
      return;
    }
    const t = setTimeout(() => setCountdown(countdown - 1), 1000);
    return () => clearTimeout(t);
  }, [countdown, target]);

  if (!lost)
    return (
      <span className="updated muted small" data-testid="last-updated">
        {conn.lastOk ? `updated ${clock(conn.lastOk)}` : "connecting…"}
      </span>
    );
  const self = conn.nodes.find((n) => n.id === conn.selfId);
  return (
    <div className="lost" role="alert" data-testid="connection-lost">
      <strong>
        Lost contact with node {self ? `${self.id} (${self.rest_address})` : window.location.host} at {clock(conn.lostSince!)}.
      </strong>{" "}
      What is shown is as of {conn.lastOk ? clock(conn.lastOk) : "never"} and may no longer be true; actions are disabled.{" "}
      {target ? (
        <>
          Node {target.id} ({target.rest_address}) answers:{" "}
          <a href={consoleUrlOn(target)} data-testid="failover-link">
            continue there
          </a>
          {countdown !== null ? (
            <>
              {" "}
              (moving in {countdown} s,{" "}
              <button type="button" className="link" onClick={() => setCountdown(null)}>
                stay
              </button>
              ; a login holds there unless the node has another host name)
            </>
          ) : null}
        </>
      ) : searched ? (
        connection.others().length ? (
          <span>No other node of the cluster answers either; retrying.</span>
        ) : (
          <span>No other node of this cluster is known; retrying this one.</span>
        )
      ) : (
        <span>Looking for another node…</span>
      )}
    </div>
  );
}
