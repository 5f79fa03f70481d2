// Shapes of the REST bodies the console reads: Kafka Connect's entities and RaftConnect's /raftconnect/v1/ ones.

export type Config = Record<string, string>;

export interface EntityState {
  state: string;
  worker_id: string | null;
  trace?: string;
}

export interface TaskState extends EntityState {
  id: number;
}

/** Connect's ConnectorStateInfo (GET /connectors/{name}/status). */
export interface ConnectorStatus {
  name: string;
  connector: EntityState;
  tasks: TaskState[];
  type: string;
}

/** Connect's ConnectorInfo (GET /connectors/{name}). */
export interface ConnectorInfo {
  name: string;
  config: Config;
  tasks: { connector: string; task: number }[];
  type: string;
}

/** GET /connectors?expand=status&expand=info */
export type ExpandedConnectors = Record<string, { status?: ConnectorStatus; info?: ConnectorInfo }>;

/** Connect's TaskInfo (GET /connectors/{name}/tasks). */
export interface TaskInfo {
  id: { connector: string; task: number };
  config: Config;
}

export interface OffsetEntry {
  partition: Record<string, unknown>;
  offset: Record<string, unknown> | null;
}

export interface RaftStatus {
  state: string;
  term: number;
  leader: string | null;
  commit_index: number;
  applied_index: number;
}

export interface ClusterNode {
  id: string;
  roles: string[];
  rest_address: string | null;
  raft_address: string | null;
  weight: number;
  alive: boolean;
  /** seconds until a departed worker's held work is reassigned (scheduled.rebalance.max.delay.ms), or null */
  reassign_in_s: number | null;
  raft: RaftStatus | null;
  raft_lag: number | null;
  connectors: string[];
  tasks: string[];
  running_tasks: string[];
}

/** GET /raftconnect/v1/cluster */
export interface ClusterView {
  node_id: string;
  raft: RaftStatus;
  leader: string | null;
  generation: number;
  epoch: number | null;
  metadata_store: string;
  nodes: ClusterNode[];
}

/** GET /raftconnect/v1/assignment */
export interface Assignment {
  generation: number;
  epoch: number | null;
  connectors: Record<string, string>;
  tasks: Record<string, string>;
}

export interface StoreSwitch {
  id: string;
  source: string;
  target: string;
  phase: string;
  progress: Record<string, unknown>;
  error: string | null;
}

/** GET /raftconnect/v1/metadata-store */
export interface StoreStatus {
  active: string;
  previous: string | null;
  stores: { name: string; backend: string | null; url: string | null; active: boolean; error?: string }[];
  switch: StoreSwitch | null;
}

/** GET /raftconnect/v1/whoami */
export interface WhoAmI {
  username: string;
  roles: string[];
  is_superuser: boolean;
  is_staff: boolean;
}

/** One entry of GET /raftconnect/v1/connectors/{name}/metrics and /raftconnect/v1/task-metrics */
export interface TaskMetric {
  connector: string;
  task: number;
  worker_id: string;
  state: string;
  records: number;
  batches: number;
  last_batch_seconds: number;
  records_per_second: number;
  /** a sink task's consumer lag in records (null while unknown, and for sources) */
  lag?: number | null;
  worker?: WorkerName;
  /** Connect's task-error-metrics of the task (total_records_skipped, ...) */
  errors?: Record<string, number>;
}

/** Connect's ConfigKeyInfo (GET /connector-plugins/{plugin}/config; "definition" in validate). */
export interface ConfigKeyInfo {
  name: string;
  type: string;
  required: boolean;
  default_value: string | null;
  importance: string;
  documentation: string;
  group?: string | null;
  display_name?: string | null;
  order_in_group?: number;
}

/** Connect's ConfigInfos (PUT /connector-plugins/{plugin}/config/validate). */
export interface ConfigInfos {
  name: string;
  error_count: number;
  groups: string[];
  configs: {
    definition: ConfigKeyInfo;
    value: { name: string; value: string | null; recommended_values: string[]; errors: string[]; visible: boolean };
  }[];
}

export interface PluginInfo {
  class: string;
  type: string;
  version: string;
}

/** One name per worker: the node id, its REST address as detail (node_id null for an unknown worker). */
export interface WorkerName {
  node_id: string | null;
  rest_address: string | null;
}

export type Health = "healthy" | "degraded" | "unassigned" | "failed";

export interface TaskHealth {
  id: number;
  state: string;
  worker: WorkerName | null;
  root_cause: string | null;
  trace?: string;
}

/** GET /raftconnect/v1/console/connectors/{name}: health derived on the server from the tasks. */
export interface ConnectorHealth {
  name: string;
  type: string;
  state: string;
  health: Health;
  task_counts: Record<string, number>;
  tasks_total: number;
  worker: WorkerName | null;
  root_cause: string | null;
  trace?: string | null;
  tasks: TaskHealth[];
}

/** GET /raftconnect/v1/console/connectors */
export interface ConnectorsHealth {
  connectors: ConnectorHealth[];
  health: Record<Health, number>;
  tasks: Record<string, number>;
  generated_at: number;
}

/** GET /raftconnect/v1/console/kafka */
export interface KafkaCluster {
  state: "ok" | "unreachable";
  bootstrap_servers: string;
  cluster_id?: string | null;
  controller_id?: number;
  brokers: { id: number; host: string; port: number }[];
  topics: { name: string; partitions: { partition: number; leader: number; end_offset: number | null }[]; error?: string }[];
  topic_count: number;
  error?: string;
}

/** [t (epoch s), records/s, lag, errors/s, records skipped so far] */
export type HistoryPoint = [number, number | null, number | null, number | null, number];

/** GET /raftconnect/v1/console/history */
export interface TaskHistoryBody {
  interval: number;
  keep_seconds: number;
  tasks: { connector: string; task: number; worker: string | null; points: HistoryPoint[] }[];
}

export interface SinkPartitionOffsets {
  topic: string;
  partition: number;
  committed: number | null;
  start_offset: number | null;
  end_offset: number | null;
  lag: number | null;
  offset_for_timestamp?: number | null;
}

export interface SourceFileOffsets {
  partition: Record<string, unknown>;
  offset: Record<string, unknown>;
  position: number | null;
  unit: "bytes" | "rows";
  size: number | null;
}

/** GET /raftconnect/v1/console/connectors/{name}/offsets */
export type OffsetsView =
  | { kind: "sink"; partitions: SinkPartitionOffsets[] }
  | { kind: "source"; partitions: SourceFileOffsets[] }
  | { kind: "other"; partitions: OffsetEntry[] };
