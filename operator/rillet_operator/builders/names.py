"""Names and labels of what a Cluster owns: one place, so builders, handlers and tests agree."""
from __future__ import annotations

GROUP = "rillet.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

CLIENT_PORT = 9092
REPLICATION_PORT = 9091   # between brokers, and the operator's way in, when listeners are set
CONTROLLER_PORT = 9093
ADMIN_PORT = 8080
MAX_VOTERS = 3
CLUSTER_DOMAIN = "cluster.local"

MANAGED_BY = "rillet-operator"
LABEL_CLUSTER = "rillet.io/cluster"
LABEL_USER = "rillet.io/user"   # on a User's Secret: the User's name
LABEL_COMPONENT = "app.kubernetes.io/component"
# The ClusterRole every broker is bound to (installed by the chart, one per release, its name
# given to the operator in RILLET_NODE_READER_ROLE): get on nodes. This is the name the chart
# gives it in the release "rillet".
NODE_READER_ROLE = "rillet-broker-node-reader"


def statefulset(cluster: str) -> str:
    return f"{cluster}-broker"


def pod(cluster: str, ordinal: int) -> str:
    return f"{statefulset(cluster)}-{ordinal}"


def headless_service(cluster: str) -> str:
    return f"{cluster}-brokers"


def bootstrap_service(cluster: str) -> str:
    return f"{cluster}-bootstrap"


def external_broker_service(cluster: str, listener: str, ordinal: int) -> str:
    """One broker's Service on an external listener (Strimzi: <cluster>-kafka-<listener>-<id>)."""
    return f"{cluster}-{listener}-{ordinal}"


def external_bootstrap_service(cluster: str, listener: str) -> str:
    return f"{cluster}-{listener}-bootstrap"


def config_map(cluster: str) -> str:
    return f"{cluster}-config"


def rebalance_plan(cluster: str) -> str:
    """The ConfigMap holding a rebalance's whole state (plan, submitted, done); status keeps
    a summary."""
    return f"{cluster}-rebalance"


def service_account(cluster: str) -> str:
    return f"{cluster}-broker"


def pdb(cluster: str) -> str:
    return f"{cluster}-broker"


def cluster_ca(cluster: str) -> str:
    """The cluster CA's key and certificate: signs the brokers' and the operator's."""
    return f"{cluster}-cluster-ca"


def cluster_ca_cert(cluster: str) -> str:
    """The cluster CA's certificate alone (ca.crt): what clients trust, published for them."""
    return f"{cluster}-cluster-ca-cert"


def clients_ca(cluster: str) -> str:
    """The clients CA's key and certificate: signs the certificates of tls Users."""
    return f"{cluster}-clients-ca"


def broker_certs(cluster: str) -> str:
    return f"{cluster}-broker-certs"


def operator_certs(cluster: str) -> str:
    return f"{cluster}-operator-certs"


def secrets_of(cluster: str) -> set[str]:
    """The names of the certificate Secrets a secured cluster owns (a User may not take one)."""
    return {cluster_ca(cluster), cluster_ca_cert(cluster), clients_ca(cluster),
            broker_certs(cluster), operator_certs(cluster)}


# The subject organisation of the certificates the cluster CA issues: it puts the brokers'
# and the operator's principals (User:CN=...,O=rillet.io) out of reach of a User's certificate,
# whose subject is its name alone.
CERT_ORGANIZATION = "rillet.io"


def broker_common_name(cluster: str) -> str:
    return f"{cluster}-broker"


def operator_common_name(cluster: str) -> str:
    return f"{cluster}-operator"


def internal_bootstrap_address(cluster: str, namespace: str) -> str:
    """The operator's way in to a cluster with listeners: the replication listener (mTLS)."""
    return f"{bootstrap_service(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}:{REPLICATION_PORT}"


def listener_bootstrap(cluster: str, namespace: str, port: int) -> str:
    return f"{bootstrap_service(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}:{port}"


def rack_binding(namespace: str, cluster: str) -> str:
    """Cluster-scoped, so the namespace is part of the name."""
    return f"rillet-{namespace}-{cluster}-broker-rack"


def pod_fqdn(cluster: str, namespace: str, ordinal: int) -> str:
    return f"{pod(cluster, ordinal)}.{headless_service(cluster)}.{namespace}.svc.{CLUSTER_DOMAIN}"


def bootstrap_address(cluster: str, namespace: str) -> str:
    return listener_bootstrap(cluster, namespace, CLIENT_PORT)


def voter_count(replicas: int) -> int:
    return min(replicas, MAX_VOTERS)


def selector_labels(cluster: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "rillet", "app.kubernetes.io/instance": cluster,
            LABEL_COMPONENT: "broker"}


def labels(cluster: str) -> dict[str, str]:
    return {**selector_labels(cluster), "app.kubernetes.io/managed-by": MANAGED_BY,
            LABEL_CLUSTER: cluster}
