"""Broker parts loaded on first use or only when configured (issue 30).

A single-node PLAINTEXT broker serving produce and fetch never needs the group coordinator
or the transaction coordinator, and importing them (with the modules only they use) is
start-up time every node paid. An `OnDemand` part is built, its module imported, the first
time something asks for it, and started then:

- a request that needs it (FindCoordinator, JoinGroup, InitProducerId with a transactional
  id, ...), through the Broker's property;
- its internal topic in the image (`__consumer_offsets`, `__transaction_state`): the node
  may lead a partition of it, whose state must be loaded and served, so the part is built
  at start-up when the topic is already there (`open`) and on the metadata step that
  creates it (`on_metadata_update`).

Until then nothing of it exists to tell about: no group or transaction lives anywhere on
the node, because either would have created the internal topic. A part's start (loading
the partitions it leads) runs in the background when a request built it; meanwhile the
part answers COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR as on any leadership move.

What follows the config is loaded the same way, by the factories at the end: a SASL
exchange (security/sasl.py) by the first SaslHandshake, so a node without a SASL listener
never imports it; TLS contexts (a listener's own, those this node dials other nodes with,
security/tls.py) only for an SSL listener; the metrics (prometheus_client) and the admin
HTTP endpoint only with admin.http.listener.

The broker's deferred imports live here (scramp aside, loaded by the first SCRAM login in
security/sasl.py), as plain statements: the layering test sees them, so a deferred import
can never hide a cycle.

Thread safety: event loop only.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING, Callable, Generic, Protocol, TypeVar

from .coordinator.host import CoordinatorHost
from .defs.broker_config import BrokerConfig
from .defs.listeners import Listener, ListenerSettings
from .defs.sasl import PLAIN
from .defs.tls import TlsSettings
from .internal_topics import OFFSETS_TOPIC, TXN_TOPIC
from .metadata.delta import MetadataDelta
from .metadata.image import MetadataImage
from .security.outbound import OutboundTls
from .security.scram_credential import ScramCredential
from .tasks import cancel_and_wait
from .txn_marker import TxnMarker

if TYPE_CHECKING:   # types only: importing them is what this module defers
    from .admin_http import AdminHttpServer, EndpointSource
    from .coordinator.manager import GroupCoordinator
    from .metrics import BrokerMetrics, MetricsSource
    from .security.sasl import PlainExchange, ScramExchange
    from .security.tls import ReloadingContext
    from .txn.coordinator import TransactionCoordinator

    SaslExchange = PlainExchange | ScramExchange

log = logging.getLogger(__name__)

C = TypeVar("C", bound="Coordinator")
TopicPartition = tuple[str, int]


class Coordinator(Protocol):
    """What the Broker does with an on-demand part besides handing it to requests."""

    async def start(self) -> None: ...   # loads the partitions of its topic this node leads

    async def stop(self) -> None: ...

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None: ...


class OnDemand(Generic[C]):
    """One part, built by ``build`` on the first `get`; ``topic`` is its internal topic.

    Nothing starts before `open` (the Broker's start-up, once its logs exist and it is
    unfenced), as a part built eagerly would not have."""

    def __init__(self, name: str, topic: str, build: Callable[[], C]) -> None:
        self.name = name
        self.topic = topic
        self._build = build
        self._part: C | None = None
        self._open = False
        self._starting: asyncio.Task[None] | None = None

    @property
    def built(self) -> C | None:
        """The part if something asked for it already, else None (nothing to tell it)."""
        return self._part

    def get(self) -> C:
        """The part, built on the first call; its start runs in the background once open."""
        part = self._part
        if part is None:
            part = self._part = self._build()
            log.info("%s loaded on first use", self.name)
            if self._open:
                self._starting = asyncio.get_running_loop().create_task(part.start())
                self._starting.add_done_callback(self._log_failed_start)
        return part

    async def open(self, image: MetadataImage) -> None:
        """Start-up: start the part now when ``image`` holds its state (or something built
        it already); from now on a first `get` starts it."""
        if self._part is not None or self.topic in image.topics:
            part = self.get()
            self._open = True
            await part.start()
        self._open = True

    def on_metadata_update(self, delta: MetadataDelta, new: MetadataImage) -> None:
        """A built part follows every step; an unbuilt one is built (and starts) on the
        step that brings its topic, as this node may lead a partition of it."""
        if self._part is not None:
            self._part.on_metadata_update(delta, new)
        elif self._open and self.topic in new.topics:
            self.get()

    async def stop(self) -> None:
        if self._starting is not None:
            await cancel_and_wait([self._starting])
        if self._part is not None:
            await self._part.stop()

    def _log_failed_start(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed to start", self.name, exc_info=task.exception())


# -- the factories: each imports its part's module when first called ---------------------------

def group_coordinator(host: CoordinatorHost) -> OnDemand[GroupCoordinator]:
    def build() -> GroupCoordinator:
        from .coordinator.manager import GroupCoordinator
        return GroupCoordinator(host)
    return OnDemand("group coordinator", OFFSETS_TOPIC, build)


def transaction_coordinator(host: CoordinatorHost,
                            on_markers_written: Callable[[TxnMarker, list[TopicPartition]],
                                                         None],
                            ssl_context: ssl.SSLContext | None) -> OnDemand[TransactionCoordinator]:
    def build() -> TransactionCoordinator:
        from .txn.coordinator import TransactionCoordinator
        return TransactionCoordinator(host, on_markers_written, ssl_context)
    return OnDemand("transaction coordinator", TXN_TOPIC, build)


def sasl_exchange(mechanism: str, plain_users: Callable[[], dict[str, str]],
                  scram_lookup: Callable[[str, str], ScramCredential | None]) -> SaslExchange:
    """A SaslHandshake's exchange for ``mechanism`` (PLAIN: against the listener's JAAS
    users, else SCRAM against the image's credentials); the first loads security/sasl.py,
    which a node without a SASL listener never needs."""
    from .security.sasl import PlainExchange, ScramExchange
    if mechanism == PLAIN:
        return PlainExchange(plain_users())
    return ScramExchange(mechanism, scram_lookup)


def outbound_tls(config: BrokerConfig) -> OutboundTls:
    """The contexts this node dials the controller and broker listeners with; security/
    tls.py loads only when one of those listeners is SSL."""
    def for_listener(listener: Listener | None) -> ssl.SSLContext | None:
        if listener is None or config.security_protocol(listener) != "SSL":
            return None
        from .security.tls import client_context
        return client_context(TlsSettings.from_config(ListenerSettings(config, listener.name)))
    return OutboundTls(controller=for_listener(config.controller_listener),
                       brokers=for_listener(config.inter_broker_listener))


def listener_tls(settings: ListenerSettings) -> ReloadingContext:
    """The server context of a listener whose protocol is SSL or SASL_SSL (rebuilt when its
    files change); the first loads security/tls.py. Raises OSError or ValueError for keys
    and certificates that do not load."""
    from .security.tls import ReloadingContext
    return ReloadingContext(TlsSettings.from_config(settings))


def broker_metrics(source: MetricsSource) -> BrokerMetrics:
    """The Prometheus metrics, for a node with the admin HTTP endpoint (the only reader):
    loads prometheus_client."""
    from .metrics import BrokerMetrics
    return BrokerMetrics(source)


def admin_http_server(source: EndpointSource, host: str, port: int) -> AdminHttpServer:
    """The admin HTTP endpoint (admin.http.listener: /healthz, /readyz, /metrics)."""
    from .admin_http import AdminHttpServer, BrokerEndpoints
    return AdminHttpServer(BrokerEndpoints(source), host, port)
