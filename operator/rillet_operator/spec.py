"""Cluster and Topic specs as frozen dataclasses, parsed from the custom resources' dicts.

The CRD's OpenAPI schema already rejects wrong types, ranges and enums at the API server;
parsing here is what the builders rely on (defaults filled in, one shape), and raises
SpecError for what a schema cannot say. Pure: no API calls, no clock.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rillet.defs.broker_defs import config_text

DEFAULT_IMAGE = "rillet/broker:dev"


class SpecError(ValueError):
    """A resource the operator cannot act on; `reason` becomes the condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Storage:
    type: str = "ephemeral"          # ephemeral | persistent-claim
    size: str | None = None          # e.g. 1Gi (persistent-claim)
    storage_class: str | None = None  # None: the cluster's default StorageClass
    delete_claim: bool = False       # a removed broker's claim goes with it on scale-down


@dataclass(frozen=True)
class Rebalance:
    throttle_bytes_per_second: int = 50 * 1024 * 1024   # 0 = unthrottled
    batch_size: int = 10


@dataclass(frozen=True)
class PodTemplate:
    affinity: dict | None = None
    tolerations: tuple[dict, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    priority_class_name: str | None = None
    # None: the restricted Pod Security Standard's defaults (builders/security_context.py).
    security_context: dict | None = None
    container_security_context: dict | None = None


@dataclass(frozen=True)
class BrokerOverride:
    """Strimzi's `configuration.brokers[]`: what one broker advertises on a listener (a host
    or port a client outside reaches it by, e.g. a DNS name in front of a node), and the
    nodePort its Service takes. None: the operator's choice."""
    broker: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_port: int | None = None


@dataclass(frozen=True)
class ListenerSpec:
    """A client listener, as Strimzi's Kafka resource names one: `name` becomes the Kafka
    listener name (upper-cased), `authentication` none | scram-sha-512 | tls (mTLS), `type`
    internal (pod DNS names) | nodeport | loadbalancer (reached from outside Kubernetes
    through per-broker Services and a bootstrap Service; builders/listeners.py)."""
    name: str
    port: int
    tls: bool = False
    authentication: str = "none"
    type: str = "internal"
    bootstrap_node_port: int | None = None
    brokers: tuple[BrokerOverride, ...] = ()

    @property
    def external(self) -> bool:
        return self.type != "internal"

    def override(self, broker: int) -> BrokerOverride:
        return next((b for b in self.brokers if b.broker == broker), BrokerOverride(broker))

    @property
    def security_protocol(self) -> str:
        sasl = self.authentication == "scram-sha-512"
        return {(False, False): "PLAINTEXT", (True, False): "SSL",
                (False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}[(self.tls, sasl)]


@dataclass(frozen=True)
class Certificates:
    """Validity of the broker and user certificates, renewed `renewal_days` before expiry;
    the CAs live `ca_validity_days`."""
    validity_days: int = 365
    renewal_days: int = 30
    ca_validity_days: int = 3650
    # False: the user brings both CAs in the Secrets the operator would make (names.cluster_ca,
    # names.clients_ca); they are validated, never created or replaced.
    generate_ca: bool = True


@dataclass(frozen=True)
class ClusterSpec:
    """One rillet Cluster, as the builders see it."""
    name: str
    namespace: str
    replicas: int
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    config: tuple[tuple[str, str], ...] = ()   # broker configs by Kafka name, as strings
    storage: Storage = field(default_factory=Storage)
    resources: dict | None = None
    rack_topology_key: str | None = None
    pod: PodTemplate = field(default_factory=PodTemplate)
    pdb_max_unavailable: int = 1
    rebalance: Rebalance = field(default_factory=Rebalance)
    # Empty: the one PLAINTEXT listener on 9092 of clusters made before listeners existed.
    # Set: these listeners, plus the operator's own mTLS listeners between brokers, for the
    # quorum and for the operator (see builders/broker_config.py), with certificates.
    listeners: tuple[ListenerSpec, ...] = ()
    authorization: bool = False      # spec.authorization.type == simple: ACLs enforced
    super_users: tuple[str, ...] = ()
    certificates: Certificates = field(default_factory=Certificates)

    @property
    def config_dict(self) -> dict[str, str]:
        return dict(self.config)

    @property
    def secured(self) -> bool:
        """Whether the operator runs this cluster's certificates and internal mTLS."""
        return bool(self.listeners)


@dataclass(frozen=True)
class TopicSpec:
    name: str            # metadata.name
    namespace: str
    cluster: str
    topic_name: str      # the Kafka topic name (spec.topicName or metadata.name)
    partitions: int
    replicas: int
    config: tuple[tuple[str, str], ...] = ()

    @property
    def config_dict(self) -> dict[str, str]:
        return dict(self.config)


def _config(raw: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    for key, value in (raw or {}).items():
        if value is None or isinstance(value, dict) or (
                isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list))
                                                         for v in value)):
            raise SpecError("InvalidConfig", f"spec.config.{key} must be a string, number, "
                                             f"boolean or list of them, got {value!r}")
    return tuple(sorted((str(k), config_text(v)) for k, v in (raw or {}).items()))


def _positive_int(spec: Mapping[str, Any], key: str, default: int | None = None,
                  where: str = "spec") -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError("InvalidSpec", f"{where}.{key} must be a whole number >= 1, "
                                       f"got {value!r}")
    return value


def parse_storage(raw: Mapping[str, Any] | None) -> Storage:
    raw = raw or {}
    kind = raw.get("type", "ephemeral")
    if kind == "ephemeral":
        return Storage()
    if kind == "persistent-claim":
        size = raw.get("size")
        if not size:
            raise SpecError("InvalidSpec", "spec.storage.size is required for persistent-claim")
        return Storage(kind, str(size), raw.get("class"), bool(raw.get("deleteClaim", False)))
    raise SpecError("InvalidSpec", f"spec.storage.type must be ephemeral or persistent-claim, "
                                   f"got {kind!r}")


def parse_cluster(name: str, namespace: str, spec: Mapping[str, Any]) -> ClusterSpec:
    pod = ((spec.get("template") or {}).get("pod")) or {}
    broker_container = ((spec.get("template") or {}).get("brokerContainer")) or {}
    pdb = spec.get("pdb") or {}
    max_unavailable = pdb.get("maxUnavailable", 1)
    if isinstance(max_unavailable, bool) or not isinstance(max_unavailable, int) \
            or max_unavailable < 0:
        raise SpecError("InvalidSpec", f"spec.pdb.maxUnavailable must be a whole number >= 0, "
                                       f"got {max_unavailable!r}")
    if (spec.get("authorization") or {}).get("type") and not spec.get("listeners"):
        raise SpecError("InvalidSpec", "spec.authorization needs spec.listeners: without them "
                                       "the brokers have no authenticated listener between "
                                       "themselves, and every client would be anonymous")
    return ClusterSpec(
        name=name, namespace=namespace,
        replicas=_positive_int(spec, "replicas"),
        image=spec.get("image") or DEFAULT_IMAGE,
        image_pull_policy=spec.get("imagePullPolicy") or "IfNotPresent",
        config=_config(spec.get("config")),
        storage=parse_storage(spec.get("storage")),
        resources=spec.get("resources") or None,
        rack_topology_key=((spec.get("rack") or {}).get("topologyKey")) or None,
        pod=PodTemplate(
            affinity=pod.get("affinity") or None,
            tolerations=tuple(pod.get("tolerations") or ()),
            labels=tuple(sorted((pod.get("labels") or {}).items())),
            annotations=tuple(sorted((pod.get("annotations") or {}).items())),
            priority_class_name=pod.get("priorityClassName") or None,
            security_context=pod.get("securityContext"),
            container_security_context=broker_container.get("securityContext")),
        pdb_max_unavailable=max_unavailable,
        rebalance=parse_rebalance(spec.get("rebalance")),
        listeners=parse_listeners(spec.get("listeners")),
        authorization=_authorization_type(spec.get("authorization")) == "simple",
        super_users=tuple((spec.get("authorization") or {}).get("superUsers") or ()),
        certificates=parse_certificates(spec.get("certificates")))


# Ports the operator's own listeners take (RESERVED_PORTS) and names it gives them.
RESERVED_PORTS = {9091: "the brokers' replication listener", 9093: "the controller listener",
                  8080: "the admin HTTP listener"}
# "plaintext" and "clients" would share the PLAINTEXT listener's port name, "admin" the admin
# port's: a Service with two ports of one name is refused by the API server.
RESERVED_NAMES = {"replication", "controller", "plaintext", "clients", "admin"}
AUTHENTICATIONS = ("none", "scram-sha-512", "tls")
LISTENER_TYPES = ("internal", "nodeport", "loadbalancer")
NODE_PORTS = (30000, 32767)   # Kubernetes' default --service-node-port-range


def _authorization_type(raw: Mapping[str, Any] | None, where: str = "spec.authorization"
                        ) -> str | None:
    kind = (raw or {}).get("type")
    if kind not in (None, "simple"):
        raise SpecError("InvalidSpec", f"{where}.type must be simple, got {kind!r}")
    return kind


def parse_listeners(raw: Any) -> tuple[ListenerSpec, ...]:
    out: list[ListenerSpec] = []
    for i, item in enumerate(raw or ()):
        where = f"spec.listeners[{i}]"
        name = str(item.get("name") or "")
        if not re.fullmatch(r"[a-z0-9]{1,11}", name):
            raise SpecError("InvalidListener", f"{where}.name must be 1-11 lowercase letters or "
                                               f"digits, got {name!r}")
        if name in RESERVED_NAMES:
            raise SpecError("InvalidListener", f"{where}.name {name!r} is the operator's own")
        port = item.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
            raise SpecError("InvalidListener", f"{where}.port must be 1024-65535, got {port!r}")
        if port in RESERVED_PORTS:
            raise SpecError("InvalidListener", f"{where}.port {port} is {RESERVED_PORTS[port]}")
        auth = (item.get("authentication") or {}).get("type", "none")
        if auth not in AUTHENTICATIONS:
            raise SpecError("InvalidListener", f"{where}.authentication.type must be one of "
                                               f"{', '.join(AUTHENTICATIONS)}, got {auth!r}")
        tls = bool(item.get("tls", False))
        if auth == "tls" and not tls:
            raise SpecError("InvalidListener", f"{where}: authentication tls (client "
                                               f"certificates) needs tls: true")
        if any(l.name == name for l in out) or any(l.port == port for l in out):
            raise SpecError("InvalidListener", f"{where}: name {name!r} or port {port} is "
                                               f"taken by another listener")
        kind = item.get("type") or "internal"
        if kind not in LISTENER_TYPES:
            raise SpecError("InvalidListener", f"{where}.type must be one of "
                                               f"{', '.join(LISTENER_TYPES)}, got {kind!r}")
        configuration = item.get("configuration") or {}
        bootstrap_port = _node_port((configuration.get("bootstrap") or {}).get("nodePort"),
                                    f"{where}.configuration.bootstrap.nodePort")
        brokers = tuple(_broker_override(b, f"{where}.configuration.brokers[{j}]")
                        for j, b in enumerate(configuration.get("brokers") or ()))
        if len({b.broker for b in brokers}) != len(brokers):
            raise SpecError("InvalidListener", f"{where}.configuration.brokers names a broker "
                                               f"twice")
        if kind != "nodeport" and (bootstrap_port or any(b.node_port for b in brokers)):
            raise SpecError("InvalidListener", f"{where}: nodePort is for type nodeport only")
        out.append(ListenerSpec(name, port, tls, auth, kind, bootstrap_port, brokers))
    return tuple(out)


def _node_port(value: Any, where: str) -> int | None:
    if value is None:
        return None
    low, high = NODE_PORTS
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError("InvalidListener", f"{where} must be {low}-{high}, got {value!r}")
    return value


def _broker_override(raw: Mapping[str, Any], where: str) -> BrokerOverride:
    broker = raw.get("broker")
    if isinstance(broker, bool) or not isinstance(broker, int) or broker < 0:
        raise SpecError("InvalidListener", f"{where}.broker must be a broker id >= 0, "
                                           f"got {broker!r}")
    host = raw.get("advertisedHost")
    if host is not None and not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", str(host)):
        raise SpecError("InvalidListener", f"{where}.advertisedHost must be a host name or "
                                           f"address, got {host!r}")
    port = raw.get("advertisedPort")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                             or not 1 <= port <= 65535):
        raise SpecError("InvalidListener", f"{where}.advertisedPort must be 1-65535, "
                                           f"got {port!r}")
    return BrokerOverride(broker, str(host) if host else None, port,
                          _node_port(raw.get("nodePort"), f"{where}.nodePort"))


def parse_certificates(raw: Mapping[str, Any] | None) -> Certificates:
    raw = raw or {}
    where = "spec.certificates"
    validity = _positive_int(raw, "validityDays", Certificates.validity_days, where)
    renewal = _positive_int(raw, "renewalDays", Certificates.renewal_days, where)
    if renewal >= validity:
        raise SpecError("InvalidSpec", f"{where}.renewalDays ({renewal}) must be less than "
                                       f"validityDays ({validity})")
    # renewalDays also decides when a CA renews: a leaf as long-lived as its CA would make a
    # brand-new CA "due" at once, and renew it again after every rollover.
    if validity >= Certificates.ca_validity_days:
        raise SpecError("InvalidSpec", f"{where}.validityDays ({validity}) must be less than "
                                       f"the CAs' validity ({Certificates.ca_validity_days} days)")
    generate = raw.get("generateCertificateAuthority", True)
    if not isinstance(generate, bool):
        raise SpecError("InvalidSpec", f"{where}.generateCertificateAuthority must be true or "
                                       f"false, got {generate!r}")
    return Certificates(validity, renewal, generate_ca=generate)


def parse_rebalance(raw: Mapping[str, Any] | None) -> Rebalance:
    raw = raw or {}
    throttle = raw.get("throttleBytesPerSecond", Rebalance.throttle_bytes_per_second)
    if isinstance(throttle, bool) or not isinstance(throttle, int) or throttle < 0:
        raise SpecError("InvalidSpec", f"spec.rebalance.throttleBytesPerSecond must be a whole "
                                       f"number >= 0, got {throttle!r}")
    return Rebalance(throttle, _positive_int(raw, "batchSize", Rebalance.batch_size,
                                             where="spec.rebalance"))


def parse_topic(name: str, namespace: str, spec: Mapping[str, Any]) -> TopicSpec:
    cluster = spec.get("cluster")
    if not cluster:
        raise SpecError("InvalidSpec", "spec.cluster is required")
    return TopicSpec(name=name, namespace=namespace, cluster=str(cluster),
                     topic_name=spec.get("topicName") or name,
                     partitions=_positive_int(spec, "partitions", 1),
                     replicas=_positive_int(spec, "replicas", 1),
                     config=_config(spec.get("config")))


@dataclass(frozen=True)
class AclRule:
    """One rule of a User's simple authorization, in Kafka's names (TOPIC, LITERAL, READ...)."""
    resource_type: str
    resource_name: str
    pattern_type: str
    operations: tuple[str, ...]
    host: str = "*"
    permission: str = "ALLOW"


@dataclass(frozen=True)
class UserSpec:
    name: str            # metadata.name: the SCRAM user name, or the certificate's CN
    namespace: str
    cluster: str
    authentication: str  # scram-sha-512 | tls
    acls: tuple[AclRule, ...] = ()
    # spec.quotas as Kafka's quota keys (producer_byte_rate, ...) -> value; empty: none.
    quotas: tuple[tuple[str, float], ...] = ()

    @property
    def principal(self) -> str:
        """The principal the brokers give this user (rillet.security: a SCRAM user by name, a
        certificate by its subject DN), which its ACLs name."""
        return f"User:CN={self.name}" if self.authentication == "tls" else f"User:{self.name}"


USER_AUTHENTICATIONS = ("scram-sha-512", "tls")
# User.spec.quotas fields (Strimzi's names) -> Kafka's quota keys; the byte rates are whole.
USER_QUOTAS = {"producerByteRate": ("producer_byte_rate", True),
               "consumerByteRate": ("consumer_byte_rate", True),
               "requestPercentage": ("request_percentage", False),
               "controllerMutationRate": ("controller_mutation_rate", False)}
ACL_RESOURCES = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER",
                 "transactionalid": "TRANSACTIONAL_ID"}
ACL_OPERATIONS = ("Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                  "DescribeConfigs", "AlterConfigs", "IdempotentWrite", "All")


def _kafka_name(camel: str) -> str:
    """Strimzi's operation names (DescribeConfigs) as Kafka's (DESCRIBE_CONFIGS)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()


def parse_acl(i: int, raw: Mapping[str, Any]) -> AclRule:
    where = f"spec.authorization.acls[{i}]"
    resource = raw.get("resource") or {}
    kind = ACL_RESOURCES.get(str(resource.get("type", "")).lower())
    if kind is None:
        raise SpecError("InvalidAcl", f"{where}.resource.type must be one of "
                                      f"{', '.join(ACL_RESOURCES)}, got {resource.get('type')!r}")
    name = "kafka-cluster" if kind == "CLUSTER" else resource.get("name")
    if not name:
        raise SpecError("InvalidAcl", f"{where}.resource.name is required for a {kind.lower()}")
    pattern = str(resource.get("patternType", "literal")).upper()
    if pattern not in ("LITERAL", "PREFIX", "PREFIXED"):
        raise SpecError("InvalidAcl", f"{where}.resource.patternType must be literal or prefix, "
                                      f"got {resource.get('patternType')!r}")
    ops = list(raw.get("operations") or ()) + ([raw["operation"]] if raw.get("operation") else [])
    if not ops:
        raise SpecError("InvalidAcl", f"{where}: name at least one operation")
    bad = [o for o in ops if o not in ACL_OPERATIONS]
    if bad:
        raise SpecError("InvalidAcl", f"{where}: unknown operations {bad}; known: "
                                      f"{', '.join(ACL_OPERATIONS)}")
    permission = str(raw.get("type", "allow")).upper()
    if permission not in ("ALLOW", "DENY"):
        raise SpecError("InvalidAcl", f"{where}.type must be allow or deny, got {raw.get('type')!r}")
    return AclRule(kind, str(name), "LITERAL" if pattern == "LITERAL" else "PREFIXED",
                   tuple(dict.fromkeys(_kafka_name(o) for o in ops)),
                   str(raw.get("host") or "*"), permission)


def parse_user(name: str, namespace: str, spec: Mapping[str, Any]) -> UserSpec:
    cluster = spec.get("cluster")
    if not cluster:
        raise SpecError("InvalidSpec", "spec.cluster is required")
    auth = (spec.get("authentication") or {}).get("type")
    if auth not in USER_AUTHENTICATIONS:
        raise SpecError("InvalidSpec", f"spec.authentication.type must be one of "
                                       f"{', '.join(USER_AUTHENTICATIONS)}, got {auth!r}")
    authorization = spec.get("authorization") or {}
    _authorization_type(authorization)
    acls = tuple(parse_acl(i, a) for i, a in enumerate(authorization.get("acls") or ()))
    return UserSpec(name, namespace, str(cluster), auth, acls,
                    parse_quotas(spec.get("quotas") or {}))


def parse_quotas(raw: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """spec.quotas as (Kafka key, value) pairs, sorted; a field left out sets no quota."""
    out = []
    for field_name, value in raw.items():
        known = USER_QUOTAS.get(field_name)
        if known is None:
            raise SpecError("InvalidSpec", f"spec.quotas.{field_name} is not one of "
                                           f"{', '.join(USER_QUOTAS)}")
        if value is None:
            continue
        key, whole = known
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 \
                or (whole and value != int(value)):
            kind = "a whole number > 0" if whole else "a number > 0"
            raise SpecError("InvalidSpec", f"spec.quotas.{field_name} must be {kind}, "
                                           f"got {value!r}")
        out.append((key, float(value)))
    return tuple(sorted(out))
