"""Storage: index.py -> segment.py -> log.py (PartitionLog; opened by log_loader.py) ->
manager.py (LogManager), as in Kafka."""
from rillet.storage.log import AppendInfo, PartitionLog
from rillet.storage.log_config import LogConfig

__all__ = ["AppendInfo", "LogConfig", "PartitionLog"]
