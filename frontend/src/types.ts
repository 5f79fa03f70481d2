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
