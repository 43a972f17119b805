"""The broker configuration of a Cluster: rendering and validation with rillet's own config
definitions (rillet.defs), so the operator refuses exactly what a broker would refuse.

One ConfigMap serves every pod (one StatefulSet template), so it holds what all brokers share;
what differs per broker (node.id = pod ordinal, process.roles and listeners of voters vs
brokers, advertised.listeners = the pod's DNS name, broker.rack = its node's zone) is added by
the start command from the pod's own identity (see `start_script`).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Mapping

from rillet.defs.broker_config import BrokerConfig
from rillet.defs.broker_defs import BROKER_DEFS, parse_value
from rillet.defs.config_error import ConfigError

from ..spec import ClusterSpec
from . import names
from .listeners import Advertised

CLIENT, CONTROLLER, REPLICATION = "PLAINTEXT", "CONTROLLER", "REPLICATION"
DATA_MOUNT = "/var/lib/rillet"
LOG_DIR = f"{DATA_MOUNT}/data"
CONFIG_MOUNT = "/etc/rillet"
CONFIG_FILE = f"{CONFIG_MOUNT}/server.properties"
RACK_MOUNT = "/var/run/rillet"
RACK_FILE = f"{RACK_MOUNT}/rack"
# The broker certificate Secret (names.broker_certs), mounted where the properties point.
CERTS_MOUNT = "/etc/rillet-certs"
KEYSTORE_KEY, CLUSTER_CA_KEY, CLIENTS_CA_KEY = "keystore.pem", "ca.crt", "clients-ca.crt"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_KEY = "admin.http.listener"

# Keys the operator sets: a user value would make a broker disagree with its Services,
# its voters or its storage.
OWNED_KEYS = frozenset({
    "node.id", "process.roles", "listeners", "advertised.listeners", "controller.listener.names",
    "inter.broker.listener.name", "listener.security.protocol.map", "controller.quorum.voters",
    "cluster.id", "log.dirs", "log.dir", "metadata.log.dir", "broker.rack", ADMIN_KEY,
    # Security comes from spec.listeners and spec.authorization, with the operator's
    # certificates: set by hand it would lock the operator and the brokers out.
    "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.truststore.location", "ssl.truststore.certificates", "ssl.client.auth",
    "sasl.enabled.mechanisms", "authorizer.class.name", "super.users",
})


def admin_http_supported() -> bool:
    """Whether this rillet knows the HTTP admin port (health, readiness, metrics)."""
    return ADMIN_KEY in BROKER_DEFS


@dataclass   # not frozen: raising sets __traceback__ on the exception
class InvalidConfig(Exception):
    """Every bad key of spec.config at once (`keys`), one problem per key in `problems`."""
    keys: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.keys[0] if self.keys else ""

    def __str__(self) -> str:
        return "; ".join(self.problems)


def voters(spec: ClusterSpec) -> str:
    return ",".join(f"{i}@{names.pod_fqdn(spec.name, spec.namespace, i)}:{names.CONTROLLER_PORT}"
                    for i in range(names.voter_count(spec.replicas)))


def broker_listeners(spec: ClusterSpec) -> list[tuple[str, int]]:
    """(Kafka listener name, port) of every listener a broker serves besides the controller's:
    the spec's, then the replication listener; the lone PLAINTEXT one without spec.listeners."""
    if not spec.secured:
        return [(CLIENT, names.CLIENT_PORT)]
    return [(l.name.upper(), l.port) for l in spec.listeners] + \
        [(REPLICATION, names.REPLICATION_PORT)]


def _cert_file(key: str) -> str:
    return f"{CERTS_MOUNT}/{key}"


def security_settings(spec: ClusterSpec) -> dict[str, str]:
    """Listener protocols, TLS files, SASL mechanisms and the authorizer.

    With spec.listeners, brokers replicate and vote over mutual TLS with the cluster CA's
    certificates (REPLICATION, CONTROLLER), which is also how the operator connects (its
    certificate, a super user). A `tls` listener checks client certificates against the
    clients CA; a scram-sha-512 one offers SCRAM-SHA-512 only."""
    if not spec.secured:
        return {"listener.security.protocol.map": f"{CLIENT}:PLAINTEXT,{CONTROLLER}:PLAINTEXT"}
    protocols = [f"{l.name.upper()}:{l.security_protocol}" for l in spec.listeners]
    protocols += [f"{REPLICATION}:SSL", f"{CONTROLLER}:SSL"]
    out = {"listener.security.protocol.map": ",".join(protocols),
           "inter.broker.listener.name": REPLICATION,
           "ssl.keystore.location": _cert_file(KEYSTORE_KEY),
           "ssl.truststore.location": _cert_file(CLUSTER_CA_KEY),
           # Required by default, for REPLICATION and CONTROLLER: a broker-only node has no
           # CONTROLLER listener to name in a listener.name.controller. key.
           "ssl.client.auth": "required"}
    for listener in spec.listeners:
        prefix = f"listener.name.{listener.name}."
        if listener.authentication == "tls":
            out[prefix + "ssl.truststore.location"] = _cert_file(CLIENTS_CA_KEY)
        elif listener.tls:
            out[prefix + "ssl.client.auth"] = "none"
        if listener.authentication == "scram-sha-512":
            out[prefix + "sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    if spec.authorization:
        out["authorizer.class.name"] = AUTHORIZER
        out["super.users"] = ";".join(super_users(spec))
    return out


def internal_principals(spec: ClusterSpec) -> list[str]:
    """The principals of the brokers' and the operator's certificates (pki.principal_of)."""
    return [f"User:CN={cn},O={names.CERT_ORGANIZATION}"
            for cn in (names.broker_common_name(spec.name),
                       names.operator_common_name(spec.name))]


def super_users(spec: ClusterSpec) -> list[str]:
    extra = [u if u.startswith("User:") else f"User:{u}" for u in spec.super_users]
    return list(dict.fromkeys(internal_principals(spec) + extra))


def shared_settings(spec: ClusterSpec, cluster_id: str, admin_http: bool) -> dict[str, str]:
    """What every broker of the cluster is configured with (the ConfigMap's properties)."""
    rf = str(min(3, spec.replicas))
    settings = {
        # Defaults a cluster of this size can meet (rillet's own default is 3).
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
    }
    settings.update(spec.config_dict)
    settings.update(security_settings(spec))
    settings.update({
        "controller.listener.names": CONTROLLER,
        "controller.quorum.voters": voters(spec),
        "cluster.id": cluster_id,
        "log.dirs": LOG_DIR,
    })
    if admin_http:
        settings[ADMIN_KEY] = f"0.0.0.0:{names.ADMIN_PORT}"
    return settings


def node_settings(spec: ClusterSpec, ordinal: int, rack: str | None = None,
                  external: Mapping[tuple[str, int], Advertised | None] | None = None,
                  host_ip: str = "") -> dict[str, str]:
    """What the start command adds for the broker of this ordinal (mirrors `start_script`;
    `host_ip`: its node's address, for what it advertises on nodeport listeners)."""
    voter = ordinal < names.voter_count(spec.replicas)
    host = names.pod_fqdn(spec.name, spec.namespace, ordinal)
    advertised = []
    for n, p in broker_listeners(spec):
        adv = (external or {}).get((n.lower(), ordinal))
        advertised.append(f"{n}://{adv.host or host_ip}:{adv.port}" if adv
                          else f"{n}://{host}:{p}")
    out = {"node.id": str(ordinal),
           "process.roles": "broker,controller" if voter else "broker",
           "listeners": _bind_listeners(spec, voter),
           "advertised.listeners": ",".join(advertised)}
    if rack:
        out["broker.rack"] = rack
    return out


def _bind_listeners(spec: ClusterSpec, voter: bool) -> str:
    bound = [f"{n}://0.0.0.0:{p}" for n, p in broker_listeners(spec)]
    if voter:
        bound.append(f"{CONTROLLER}://0.0.0.0:{names.CONTROLLER_PORT}")
    return ",".join(bound)


def mode_change(spec: ClusterSpec, rendered: str | None) -> str | None:
    """Why the spec cannot be applied over what the brokers run (`rendered`: the ConfigMap's
    properties, None before the first reconcile), or None.

    Adding spec.listeners to a running cluster (or removing them) would move replication and
    the quorum between PLAINTEXT and mutual TLS listeners: brokers restarted one at a time
    could not reach the ones not yet restarted, nor the operator any of the old ones."""
    if not rendered:
        return None
    running = f"inter.broker.listener.name={REPLICATION}" in rendered.splitlines()
    if running == spec.secured:
        return None
    if spec.secured:
        return ("spec.listeners cannot be added to a running Cluster: its brokers replicate "
                "and vote over PLAINTEXT, and a rolling restart cannot move them to mutual "
                "TLS; create a new Cluster with listeners and move the data")
    return ("spec.listeners cannot be removed from a running Cluster: its brokers replicate "
            "and vote over mutual TLS; put the listeners back")


def render_properties(settings: dict[str, str]) -> str:
    lines = ["# Rendered by the rillet operator; per-broker settings are added at start."]
    lines += [f"{k}={v}" for k, v in sorted(settings.items())]
    return "\n".join(lines) + "\n"


def key_problem(key: str, value: str) -> str | None:
    """What is wrong with one spec.config entry on its own, or None."""
    if key in OWNED_KEYS:
        return f"spec.config.{key} is set by the operator and cannot be overridden"
    if key not in BROKER_DEFS:
        return f"spec.config.{key} is not a rillet broker config"
    try:
        parse_value(BROKER_DEFS[key], value)
    except ConfigError as exc:
        return f"spec.config: {exc}"
    return None


def validate(spec: ClusterSpec, cluster_id: str) -> None:
    """Raise InvalidConfig naming every key of spec.config that would keep a broker from
    starting (a user fixes them all in one edit, not one per reconcile).

    Each key is checked on its own first; when all pass, the full configuration of a voter and
    (if any) a broker-only node is loaded with rillet's own BrokerConfig, the code the broker
    runs at start, for what only the keys together decide."""
    bad = {k: p for k, v in spec.config for p in [key_problem(k, v)] if p}
    if bad:
        raise InvalidConfig(tuple(bad), tuple(bad.values()))
    # Without the admin listener: the operator renders that one itself.
    shared = shared_settings(spec, cluster_id, admin_http=False)
    ordinals = {0}
    if spec.replicas > names.MAX_VOTERS:
        ordinals.add(names.MAX_VOTERS)
    for ordinal in sorted(ordinals):
        try:
            BrokerConfig.load(overrides={**shared, **node_settings(spec, ordinal, "rack")})
        except ConfigError as exc:
            key = next((k for k in spec.config_dict if k in str(exc)), "")
            raise InvalidConfig((key,) if key else (), (f"spec.config: {exc}",)) from None


# Broker configs whose value must fit the number of brokers: (key, what breaks).
FITS_BROKERS = (
    ("min.insync.replicas", "acks=all writes to topics that keep this default would fail"),
    ("default.replication.factor", "topics created with the default replication factor "
                                   "would be refused"),
    ("offsets.topic.replication.factor", "consumer groups could not commit offsets"),
    ("transaction.state.log.replication.factor", "transactions could not start"),
)


def config_warnings(spec: ClusterSpec) -> list[str]:
    """What spec.config allows brokers to start with but the cluster's size cannot carry out:
    a warning in status (condition ConfigWarning) while the Cluster stays Ready. Pure."""
    config = spec.config_dict
    out = []
    for key, effect in FITS_BROKERS:
        value = _int_or_none(config.get(key))
        if value is not None and value > spec.replicas:
            out.append(f"{key} {value} exceeds the cluster's {spec.replicas} broker"
                       f"{'s' if spec.replicas != 1 else ''}: {effect}")
    min_isr = _int_or_none(config.get("min.insync.replicas"))
    rf = _int_or_none(config.get("default.replication.factor"))
    rf = rf if rf is not None else _int_or_none(BROKER_DEFS["default.replication.factor"].default)
    # (Past the broker count, the warning above says it already.)
    if min_isr is not None and rf is not None and rf < min_isr <= spec.replicas:
        out.append(f"min.insync.replicas {min_isr} exceeds default.replication.factor {rf}: "
                   f"acks=all writes to topics created with the default would fail")
    return out


def _int_or_none(value: object) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _advertised(spec: ClusterSpec, domain: str, ordinal: int | None,
                external: Mapping[tuple[str, int], Advertised | None]) -> str:
    """advertised.listeners for broker `ordinal` (None: any, in-cluster names only). An
    external listener whose address is not known yet advertises the in-cluster name."""
    out = []
    for name, port in broker_listeners(spec):
        adv = external.get((name.lower(), ordinal)) if ordinal is not None else None
        out.append(f"{name}://{adv.shell()}" if adv else f"{name}://$HOSTNAME.{domain}:{port}")
    return ",".join(out)


def start_script(spec: ClusterSpec,
                 external: Mapping[tuple[str, int], Advertised | None] | None = None) -> str:
    """The broker container's command: node identity from the pod's name, rack from the file
    the init container wrote, then `rillet serve` on the shared properties. `external`: what
    each broker advertises on the external listeners (builders/listeners.advertised_table)."""
    headless = names.headless_service(spec.name)
    domain = f"{headless}.{spec.namespace}.svc.{names.CLUSTER_DOMAIN}"
    voters_n = names.voter_count(spec.replicas)
    external = external or {}
    everyone = _advertised(spec, domain, None, external)
    ordinals = sorted({o for (_, o) in external})
    # Without external listeners the command is the one operators before them wrote: a
    # changed command is a new StatefulSet revision, which would roll every broker of
    # every existing Cluster once on an operator upgrade.
    advertised, setting = [], everyone
    if ordinals:
        advertised = ['case "$ordinal" in'] + [
            f'  {o}) advertised="{_advertised(spec, domain, o, external)}";;' for o in ordinals
        ] + [f'  *) advertised="{everyone}";;', "esac"]
        setting = "$advertised"
    return "\n".join([
        "set -eu",
        'ordinal="${HOSTNAME##*-}"',
        f'if [ "$ordinal" -lt {voters_n} ]; then',
        f"  roles=broker,controller; listeners={shlex.quote(_bind_listeners(spec, True))}",
        "else",
        f"  roles=broker; listeners={shlex.quote(_bind_listeners(spec, False))}",
        "fi",
        *advertised,
        f'set -- --config {CONFIG_FILE} --set "node.id=$ordinal" --set "process.roles=$roles"'
        f' --set "listeners=$listeners"'
        f' --set "advertised.listeners={setting}"',
        f'if [ -s {RACK_FILE} ]; then set -- "$@" --set "broker.rack=$(cat {RACK_FILE})"; fi',
        'echo "rillet: starting node $ordinal ($roles) as uid $(id -u) with $*" >&2',
        'exec rillet serve "$@"',
    ])


# The init container: reads its Node through the API (service-account token) and writes the
# label value named by RACK_TOPOLOGY_KEY into RACK_FILE, where the start command takes
# broker.rack from. Python, because the broker image has it and no kubectl.
RACK_INIT_SCRIPT = f"""\
import json, os, ssl, sys, time, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
node, key = os.environ["NODE_NAME"], os.environ["RACK_TOPOLOGY_KEY"]
url = "https://%s:%s/api/v1/nodes/%s" % (os.environ["KUBERNETES_SERVICE_HOST"],
                                         os.environ["KUBERNETES_SERVICE_PORT"], node)
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
for attempt in range(30):
    try:
        req = urllib.request.Request(url, headers={{"Authorization": "Bearer "
                                     + open(sa + "/token").read().strip()}})
        labels = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["metadata"].get("labels", {{}})
        break
    except Exception as exc:
        print("rack: reading node %s failed (%s), retrying" % (node, exc), flush=True)
        time.sleep(2)
else:
    sys.exit("rack: cannot read node %s" % node)
rack = labels.get(key)
if not rack:
    sys.exit("rack: node %s has no label %s" % (node, key))
open("{RACK_FILE}", "w").write(rack)
print("rack: node %s, %s=%s" % (node, key, rack), flush=True)
"""
