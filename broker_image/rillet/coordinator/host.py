"""What the group coordinator uses of the broker it runs in.

A Protocol the Broker matches as it stands (nothing in coordinator/ imports broker.py): this
node's id and config, the committed metadata image, the logs of __consumer_offsets, the
replica manager that appends to them as leader and waits for their high watermark, and the
controller channel that creates the topic on first use.
"""
from __future__ import annotations

from typing import Protocol

from ..controller.channel import ControllerChannel
from ..defs.broker_config import BrokerConfig
from ..metadata.image import MetadataImage
from ..replication.manager import ReplicaManager
from ..storage.manager import LogManager


class CoordinatorHost(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def replication(self) -> ReplicaManager: ...

    @property
    def channel(self) -> ControllerChannel | None: ...
