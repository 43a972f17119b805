"""The broker configs that change without a restart (dynamic broker configs, KIP-226).

Only keys whose new value is used at once are dynamic in rillet; the broker refuses any other
key in an AlterConfigs (dynamic_config.py), and the operator applies these from spec.config
without rolling the brokers.
"""
from __future__ import annotations

DYNAMIC_KEYS = frozenset({
    # replication throttles (replication/throttle.py reads them on every change)
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    # defaults of topics without an override: every log's config is rebuilt on a change
    "log.retention.ms", "log.retention.minutes", "log.retention.hours",
    "log.retention.bytes", "log.segment.bytes", "log.roll.ms", "log.roll.hours",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.index.interval.bytes",
    "log.index.size.max.bytes", "log.cleanup.policy", "log.message.timestamp.type",
    "message.max.bytes", "min.insync.replicas",
    # the log cleaner reads them on each pass
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.backoff.ms", "log.cleaner.threads",
    # read by every produce that would start a transaction on a partition (txn/verification.py)
    "transaction.partition.verification.enable",
})
