"""rillet's own small asyncio Kafka client (on the same kio codec as the broker).

The names below load on first use (PEP 562): the broker imports rillet.client.connection
(Raft's and the fetchers' transport), and Python runs this file first, so eager re-exports
would load the whole admin client into every broker start.
"""
from typing import Any

__all__ = ["AdminClient", "BrokerConnection", "GroupDescription", "KafkaClientError",
           "MemberDescription", "PartitionLag"]


def __getattr__(name: str) -> Any:
    if name == "AdminClient":
        from .admin import AdminClient
        return AdminClient
    if name in ("GroupDescription", "MemberDescription", "PartitionLag"):
        from . import admin_groups
        return getattr(admin_groups, name)
    if name in ("BrokerConnection", "KafkaClientError"):
        from . import connection
        return getattr(connection, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
