"""Cluster reconcile: validate, apply the owned objects, measure the brokers, write status.

Level-based and idempotent: the same function serves create, update, resume and the timer,
so a deleted or edited owned object is put back within one timer interval.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import kopf
from rillet.client import KafkaClientError
from rillet.defs.cluster_id import new_cluster_id

from .. import cluster_status
from ..builders import broker_config as bc
from ..builders import cluster as builders
from ..builders import names
from ..conditions import CLUSTER_TRACKED, READY, Outcome, Step
from ..conditions import get as get_condition
from ..kube import ApiError
from ..spec import SpecError, parse_cluster
from . import access, certificates
from .common import kube, lock, write_outcome
from .rolling import apply_dynamic_configs, roll_step
from .scaling import scale_step

# The chart's node-reader ClusterRole of this release (named per release).
NODE_READER_ROLE = os.environ.get("RILLET_NODE_READER_ROLE") or names.NODE_READER_ROLE


async def _cluster_id(name: str, namespace: str, status: dict) -> str:
    """Generated once and kept in status; written before anything uses it, so a broker's
    storage is never formatted with an id the status does not hold."""
    if status.get("clusterId"):
        return status["clusterId"]
    k = kube()
    existing = await asyncio.to_thread(k.get, "ConfigMap", names.config_map(name), namespace)
    found = None
    for line in ((existing or {}).get("data") or {}).get("server.properties", "").splitlines():
        if line.startswith("cluster.id="):
            found = line.split("=", 1)[1].strip()
    cluster_id = found or new_cluster_id()
    await asyncio.to_thread(k.patch, "Cluster", name, {"status": {"clusterId": cluster_id}},
                            namespace, "status")
    return cluster_id


async def reconcile(body: Any, meta: Any, spec: Any, status: Any, name: str, namespace: str,
                    patch: kopf.Patch, logger: Any, memo: Any, **_: Any) -> None:
    async with lock(memo):
        await _reconcile(body, meta, spec, dict(status), name, namespace, patch, logger)


async def _reconcile(body: Any, meta: Any, spec: Any, status: dict, name: str, namespace: str,
                     patch: kopf.Patch, logger: Any) -> None:
    generation = meta.get("generation") or 0
    k = kube()
    cluster_id = await _cluster_id(name, namespace, status)
    patch.status["clusterId"] = cluster_id
    def refuse(reason: str, message: str) -> None:
        write_outcome(patch, status, Outcome(False, reason, message, error=True), generation,
                      body, logger, CLUSTER_TRACKED)

    try:
        cs = parse_cluster(name, namespace, dict(spec))
        bc.validate(cs, cluster_id)
    except SpecError as exc:
        return refuse(exc.reason, str(exc))
    except bc.InvalidConfig as exc:
        return refuse("InvalidConfig", str(exc))
    rendered = await asyncio.to_thread(k.get, "ConfigMap", names.config_map(name), namespace)
    refusal = bc.mode_change(cs, ((rendered or {}).get("data") or {}).get("server.properties"))
    if refusal:
        return refuse("ListenersChangeUnsupported", refusal)
    admin_http = bc.admin_http_supported()
    cert_hash = ""
    if cs.secured:
        try:
            issued = await certificates.ensure(cs, meta, status, body, logger)
        except (certificates.CertificateError, ApiError) as exc:
            return refuse("CertificateError", str(exc))
        cert_hash = issued.broker_fingerprint
        patch.status["certificates"] = issued.status
        target = access.secured_target(cs, issued.operator, issued.cluster_ca_pem)
    else:
        target = await access.target(cs)
    # How many broker pods to run now: scaling decides (never fewer than hold data).
    decision = await scale_step(cs, body, meta, status, patch, logger, target)
    running = dataclasses.replace(cs, replicas=decision.statefulset_replicas)
    try:
        for obj in builders.owned_objects(running, cluster_id, admin_http, cert_hash):
            kopf.append_owner_reference(obj, owner=body)
            await _apply(obj, body, logger)
        if cs.rack_topology_key:
            binding = builders.rack_binding(cs, NODE_READER_ROLE)
            # Cluster-scoped, so it cannot be owned by the Cluster: the namespace owns it (it
            # goes with the namespace), and the delete handler removes it with the Cluster.
            ns = await asyncio.to_thread(k.get, "Namespace", namespace)
            if ns:
                kopf.append_owner_reference(binding, owner=ns, controller=False,
                                            block_owner_deletion=False)
            await _apply(binding, body, logger)
    except ApiError as exc:
        return refuse("ApplyFailed", str(exc))
    pods = {p["metadata"]["name"]: p for p in await asyncio.to_thread(
        k.list, "Pod", namespace, names.selector_labels(name))}
    node_labels: dict[str, dict] = {}
    for node in {(p.get("spec") or {}).get("nodeName") for p in pods.values()} - {None}:
        got = await asyncio.to_thread(k.get, "Node", node)
        node_labels[node] = ((got or {}).get("metadata") or {}).get("labels") or {}
    brokers = cluster_status.brokers(running, pods, node_labels)
    patch.status["brokers"] = brokers
    patch.status["readyBrokers"] = sum(1 for b in brokers if b["state"] == "Ready")
    patch.status["replicas"] = decision.statefulset_replicas
    listeners = cluster_status.listeners(cs)
    patch.status["listeners"] = listeners
    patch.status["bootstrapServers"] = listeners[0]["bootstrapServers"]
    all_ready = cluster_status.outcome(running, brokers).ready
    was_ready = (get_condition(status.get("conditions") or [], READY) or {}).get("status")
    serves = cluster_status.serving(running, brokers, _new_brokers(
        patch.status.get("scaling", status.get("scaling"))), established=was_ready == "True")
    unreachable = None
    try:
        rolling = await roll_step(running, body, meta, status, patch, logger, target)
        if all_ready:
            await apply_dynamic_configs(running, status, patch, body, logger, target)
    except (KafkaClientError, OSError, asyncio.TimeoutError) as exc:
        # Every pass while it lasts: DEBUG; Reconciling says it. Ready stays what the brokers'
        # readiness says (they report registered and caught up): it is the operator's way in
        # that fails, which a restart or a roll's next step waits for.
        logger.debug("cluster %s not reachable for restarts or configs: %s", name, exc)
        rolling = None
        unreachable = Step("ClusterNotReachable", f"the operator cannot reach the brokers for "
                                                  f"restarts and configs: "
                                                  f"{type(exc).__name__}: {exc}")
    outcome = cluster_status.combine(serves, rolling, decision.outcome, bc.config_warnings(cs),
                                     unreachable)
    write_outcome(patch, status, outcome, generation, body, logger, CLUSTER_TRACKED)


def _new_brokers(scaling: dict | None) -> frozenset[int]:
    """Brokers a scale-up is still adding: not yet part of what the cluster serves with."""
    scaling = scaling or {}
    low, high = scaling.get("from"), scaling.get("to")
    if scaling.get("phase") in (None, "Done") or low is None or high is None or high <= low:
        return frozenset()
    return frozenset(range(int(low), int(high)))


async def _apply(obj: dict, owner: Any, logger: Any) -> None:
    """Creates or brings an owned object in line. Created and corrected (someone else changed
    it) objects get an Event; an update the operator itself wants (after a spec change or a
    scaling step, which have their own Events) gets a log line."""
    what = f"{obj['kind']} {obj['metadata']['name']}"
    result, paths = await asyncio.to_thread(kube().apply, obj)
    changed = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    if result == "created":
        kopf.info(owner, reason="Created", message=f"created {what}")
        logger.info("created %s", what)
    elif result == "corrected":
        kopf.warn(owner, reason="Corrected", message=f"{what} was changed outside the "
                                                     f"operator ({changed}): put back")
        logger.warning("corrected %s, changed outside the operator (%s)", what, changed)
    elif result == "updated":
        logger.info("updated %s (%s)", what, changed)


async def delete(name: str, namespace: str, logger: Any, **_: Any) -> None:
    """The cluster-scoped rack binding goes with the Cluster (namespaced objects go by GC)."""
    if await asyncio.to_thread(kube().delete, "ClusterRoleBinding",
                               names.rack_binding(namespace, name)):
        logger.info("deleted ClusterRoleBinding %s", names.rack_binding(namespace, name))
