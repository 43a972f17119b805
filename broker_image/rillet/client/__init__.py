"""rillet's own small asyncio Kafka client (on the same kio codec as the broker)."""
from .admin import AdminClient
from .admin_groups import GroupDescription, MemberDescription, PartitionLag
from .connection import BrokerConnection, KafkaClientError

__all__ = ["AdminClient", "BrokerConnection", "GroupDescription", "KafkaClientError",
           "MemberDescription", "PartitionLag"]
