"""The API registry: each API module registers its key and version range beside its handler.

ApiVersions is answered from this registry, so what is advertised is what is
implemented. A duplicate key or an inverted range fails at import time; that
kio has schemas for every advertised version is checked by a unit test
(loading them all here would cost a second of start-up).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Protocol

from ..controller.channel import ControllerChannel
from ..controller.controller import Controller
from ..defs.acl import CODES
from ..defs.broker_config import BrokerConfig
from ..forwarding import ControllerForwarder
from ..metadata.image import MetadataImage
from ..metadata.snapshot import SnapshotStore
from ..metadata.view import MetadataView
from ..protocol import errors
from ..protocol.build import build
from ..protocol.codec import RequestHeader, response_schema
from ..quotas.manager import ClientQuotaManager, user_of
from ..raft.node import RaftNode
from ..replication.manager import ReplicaManager
from ..security.authorizer import Authorizer
from ..security.scram_credential import ScramCredential
from ..security.session import Session
from ..storage.manager import LogManager

if TYPE_CHECKING:   # types only: the Broker loads them on first use (on_demand.py)
    from ..coordinator.manager import GroupCoordinator
    from ..txn.coordinator import TransactionCoordinator


# The operations Kafka lists in a resource's authorized operations.
RESOURCE_OPERATIONS = {
    "CLUSTER": ("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                "ALTER_CONFIGS", "IDEMPOTENT_WRITE"),
    "TOPIC": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS"),
    "GROUP": ("READ", "DELETE", "DESCRIBE"),
}
# What a *_authorized_operations field holds when the client did not ask.
OPERATIONS_UNSET = -(2**31)


# dispatch(broker, frame, peer, connection_id, listener, session) -> the response frame.
Redispatch = Callable[["BrokerServices", bytes, str, int, str, Session],
                      Awaitable["bytes | None"]]


@dataclass
class RequestContext:
    """Everything a handler may use for one request."""
    broker: "BrokerServices"
    header: RequestHeader
    peer: str
    connection_id: int
    listener: str = "broker"   # "controller" on the CONTROLLER listener
    session: Session = field(default_factory=Session)
    # The dispatcher that made this context: Envelope hands its inner frame back to it
    # (apis never import dispatch, which imports them).
    redispatch: "Redispatch | None" = None
    request_bytes: int = 0   # the request's size on the wire (what producer_byte_rate counts)
    # The longest wait a client quota asked of this request (quotas/manager.py); dispatch
    # puts it in the response's throttle_time and mutes the connection for it.
    throttle_s: float = 0.0
    quota_exempt: bool = False   # a replica's fetch: no client quota holds it (as Kafka)
    # The response holds FileRecords (protocol/file_records.py): dispatch frames it as a
    # SplicedFrame, whose records go out of their segment files.
    spliced: bool = False

    def record_quota(self, key: str, amount: float) -> float:
        """Count ``amount`` against this client's quota ``key``; the wait it asks for (this
        request's throttle grows to it)."""
        if self.quota_exempt:
            return 0.0
        wait = self.broker.quotas.record(self.broker.image.client_quotas, key,
                                         user_of(self.principal),
                                         self.header.client_id or "", amount)
        self.throttle_s = max(self.throttle_s, wait)
        return wait

    def quota_allowance(self, key: str) -> int:
        """The most one request may count against quota ``key`` and still pass (a huge
        number when no quota holds this client)."""
        return self.broker.quotas.allowance(self.broker.image.client_quotas, key,
                                            user_of(self.principal),
                                            self.header.client_id or "")

    def unrecord_quota(self, key: str, amount: float) -> None:
        self.broker.quotas.unrecord(self.broker.image.client_quotas, key,
                                    user_of(self.principal), self.header.client_id or "",
                                    amount)

    @property
    def principal(self) -> str:
        return self.session.principal

    def authorized(self, operation: str, resource_type: str, name: str, *,
                   quiet: bool = False) -> bool:
        """Whether this request's principal may do ``operation`` on the resource (always,
        when no authorizer is configured). ``quiet``: a refusal is not logged (a check
        with a fallback, or one that only filters what is shown)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.session, operation, resource_type, name, quiet=quiet)

    def authorized_operations(self, resource_type: str, name: str) -> int:
        """The *_authorized_operations bit field Kafka answers when a client asks for it: a
        bit (1 << operation code) per operation allowed on the resource, none at all
        without DESCRIBE on it."""
        if not self.authorized("DESCRIBE", resource_type, name, quiet=True):
            return 0
        return sum(1 << CODES["operation"][op] for op in RESOURCE_OPERATIONS[resource_type]
                   if self.authorized(op, resource_type, name, quiet=True))

    def require(self, operation: str, resource_type: str, name: str) -> None:
        """Raise the authorization error Kafka answers for the resource type when this
        request's principal may not do ``operation`` on it."""
        if not self.authorized(operation, resource_type, name):
            raise _DENIED[resource_type](f"{self.principal} may not {operation} "
                                         f"{resource_type.lower()} {name}")

    async def await_topics(self, names: Iterable[str]) -> None:
        """Give this node's image a moment (LAGGING_VIEW_WAIT_S) to show topics it does not
        know yet, before a handler answers from that view. A topic created through another
        node reaches this one within milliseconds (bench/metadata_propagation.py); a client
        sent here by a newer view (a commit right after the topic was created elsewhere)
        would otherwise meet UNKNOWN_TOPIC_OR_PARTITION, which librdkafka does not retry on
        commit or offset queries. Only requests naming unknown topics the principal may
        DESCRIBE wait: for any other name the answer is the same either way, and a wait
        would tell an unauthorized client which topics exist. A topic that does not exist
        at all costs its request this wait (the connection's next request waits behind it)."""
        raft = self.broker.raft
        # The active controller has applied everything committed: its view cannot lag.
        if raft is None or raft.is_active:
            return
        known = self.broker.image.topics.keys()
        wanted = {n for n in names if n and n not in known
                  and self.authorized("DESCRIBE", "TOPIC", n, quiet=True)}
        if not wanted:
            return
        await self.broker.metadata.wait_until(lambda image: wanted <= image.topics.keys(),
                                              LAGGING_VIEW_WAIT_S)

    @property
    def version(self) -> int:
        return self.header.api_version

    def response(self, data: dict[str, Any]) -> Any:
        """The response entity of this request's key and version, built from plain values."""
        return build(response_schema(self.header.api_key, self.header.api_version), data)


_DENIED = {"TOPIC": errors.TopicAuthorizationFailed, "GROUP": errors.GroupAuthorizationFailed,
           "CLUSTER": errors.ClusterAuthorizationFailed,
           "TRANSACTIONAL_ID": errors.TransactionalIdAuthorizationFailed}
CLUSTER = "kafka-cluster"   # the one cluster resource's name
# How long a request naming topics this node does not know waits for its view to catch up.
LAGGING_VIEW_WAIT_S = 0.3

Handler = Callable[[RequestContext, Any], Awaitable[Any]]
# Raw handler for advertised versions kio has no schema for (Produce v0-2 is
# advertised for librdkafka's feature checks but answered UNSUPPORTED_VERSION).
RawHandler = Callable[[RequestContext, bytes], bytes | None]
# A forwarded change is answered by the active controller once committed there; this node
# (the one the client asked) holds the answer until its own image shows the change too, so
# the client's next request to it never meets the old view. (image, request, response).
Settled = Callable[[MetadataImage, Any, Any], bool]


@dataclass(frozen=True)
class ApiSpec:
    """One registered API: key, versions served, handler and how it is dispatched."""
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    decodable_from: int
    raw_handler: RawHandler | None = None
    # "controller": quorum and broker-lifecycle RPCs, served on the controller
    # listener only (and advertised only there), as Kafka splits them.
    scope: str = "broker"
    # Decided by the active controller: another node relays the request to it.
    forward: bool = False
    # With forward: when this node's image shows what the controller's answer says is done.
    settled: Settled | None = None
    # With forward: which requests go (None: all); the others are answered here.
    forward_when: Callable[[Any], bool] | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def served_on(self, listener: str) -> bool:
        return self.scope == "broker" or listener == "controller"


REGISTRY: dict[int, ApiSpec] = {}


def api(key: int, versions: tuple[int, int], *, decodable_from: int | None = None,
        raw_handler: RawHandler | None = None, scope: str = "broker",
        forward: bool = False, settled: Settled | None = None,
        forward_when: Callable[[Any], bool] | None = None) -> Callable[[Handler], Handler]:
    low, high = versions
    if low > high or low < 0:
        raise ValueError(f"api {key}: bad version range {versions}")
    first = low if decodable_from is None else decodable_from
    if first > low and raw_handler is None:
        raise ValueError(f"api {key}: versions below {first} need a raw handler")

    def register(handler: Handler) -> Handler:
        if key in REGISTRY:
            raise ValueError(f"api {key} registered twice "
                             f"({REGISTRY[key].handler.__module__}, {handler.__module__})")
        if scope not in ("broker", "controller"):
            raise ValueError(f"api {key}: unknown scope {scope!r}")
        # Every handler is awaited: a plain function here is a decorator placed on the
        # wrong definition, which would answer the API with that function's return value.
        if not inspect.iscoroutinefunction(handler):
            raise TypeError(f"api {key}: {handler.__module__}.{handler.__qualname__} is not "
                            f"an async handler")
        REGISTRY[key] = ApiSpec(key, handler.__module__.rsplit(".", 1)[-1], low, high,
                                handler, first, raw_handler, scope, forward, settled,
                                forward_when)
        return handler

    return register


# -- what requests use of their broker -------------------------------------------------------

class RequestMetrics(Protocol):
    """The counters the request path feeds (metrics.BrokerMetrics)."""
    bytes_in: int

    def request_done(self, listener: str, spec: ApiSpec, version: int,
                     seconds: float) -> None: ...

    def fetch_sent(self, size: int, follower: bool) -> None: ...

    def authentication_failed(self, listener_name: str) -> None: ...


class BrokerServices(Protocol):
    """What the API handlers and dispatch use of their broker. The Broker implements it
    structurally: nothing in apis/ imports broker.py, so the request path knows the parts
    it calls and not the object that wires them. Parts that exist only once the quorum
    runs, or only when configured, are Optional here as on the Broker."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def config(self) -> BrokerConfig: ...   # the current one (dynamic configs replace it)

    @property
    def image(self) -> MetadataImage: ...

    @property
    def metadata(self) -> MetadataView: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def replication(self) -> ReplicaManager: ...

    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...

    @property
    def metrics(self) -> RequestMetrics | None: ...

    @property
    def quotas(self) -> ClientQuotaManager: ...

    @property
    def authorizer(self) -> Authorizer | None: ...   # None: every request is allowed

    # Once the quorum runs (Broker.start_quorum):
    @property
    def controller(self) -> Controller | None: ...

    @property
    def raft(self) -> RaftNode | None: ...

    @property
    def channel(self) -> ControllerChannel | None: ...

    @property
    def forwarder(self) -> ControllerForwarder | None: ...

    @property
    def snapshots(self) -> SnapshotStore | None: ...

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def controller_id_for_clients(self) -> int: ...
