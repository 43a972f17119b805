"""One module per Kafka API; importing this package registers them all."""
from importlib import import_module

from .registry import REGISTRY, ApiSpec, RequestContext, api

MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets",
    "create_topics", "delete_topics", "create_partitions",
    "describe_configs", "alter_configs", "incremental_alter_configs",
    "describe_cluster", "init_producer_id", "offset_for_leader_epoch",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
    "offset_commit", "offset_fetch", "list_groups", "describe_groups", "delete_groups",
    "offset_delete", "vote", "begin_quorum_epoch", "end_quorum_epoch", "describe_quorum",
    "broker_registration", "broker_heartbeat", "fetch_snapshot", "alter_partition",
    "delete_records", "alter_partition_reassignments", "list_partition_reassignments",
    "elect_leaders", "unregister_broker", "describe_log_dirs", "assign_replicas_to_dirs",
    "sasl_handshake", "sasl_authenticate", "user_scram_credentials", "acls", "envelope",
    "client_quotas", "write_txn_markers",
    "describe_producers", "add_partitions_to_txn", "end_txn",
    "add_offsets_to_txn", "txn_offset_commit", "describe_transactions", "list_transactions",
)


def load_all() -> dict[int, ApiSpec]:
    for name in MODULES:
        import_module(f"{__name__}.{name}")
    return REGISTRY


__all__ = ["REGISTRY", "ApiSpec", "RequestContext", "api", "load_all"]
