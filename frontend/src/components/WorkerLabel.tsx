import { workerLabel } from "../health";
import type { WorkerName } from "../types";

/** A worker by its one name (node id), its REST address on hover and as data. */
export function WorkerLabel({ worker }: { worker: WorkerName | null | undefined }) {
  if (!worker) return <span className="muted">–</span>;
  return (
    <span className="worker" title={worker.rest_address ? `REST ${worker.rest_address}` : undefined} data-worker={worker.node_id ?? ""}>
      {workerLabel(worker)}
    </span>
  );
}
