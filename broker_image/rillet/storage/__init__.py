"""Storage: index.py -> segment.py -> local_log.py (the segments) -> log.py (PartitionLog;
opened by log_loader.py) -> manager.py (LogManager), as in Kafka. Import the modules
themselves: this package re-exports nothing, so no module of it waits on another through it."""
