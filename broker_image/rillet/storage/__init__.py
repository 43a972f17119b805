"""Storage: index.py -> segment.py -> log.py (PartitionLog) -> manager.py (LogManager), as in Kafka."""
from rillet.storage.log import AppendInfo, LogConfig, PartitionLog

__all__ = ["AppendInfo", "LogConfig", "PartitionLog"]
