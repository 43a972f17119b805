"""One reconcile pass of a Cluster as an object: the pass's state on the reconciler, its steps
named and called in order by `reconcile` (the shape of Strimzi's KafkaReconciler).

The objects come from the pure builders (builders/), the decisions from the pure planners
(cluster_status.py, planner.py, roll.py); the steps here only read the cluster, apply, and
write status through the patch. Level-based and idempotent: the same pass serves create,
update, resume and the timer, so a deleted or edited owned object is put back within one timer
interval.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

import kopf
from rillet.client import KafkaClientError
from rillet.defs.cluster_id import new_cluster_id

from .. import cluster_status, rollover_users, storage_growth
from ..builders import broker_config as bc
from ..builders import cluster as builders
from ..builders import listeners, names
from ..conditions import CERT_ROLLOVER_WAITING, CLUSTER_TRACKED, READY, Outcome, Step
from ..conditions import get as get_condition
from ..kube import ApiError, Kube
from ..spec import ClusterSpec, SpecError, parse_cluster
from . import access, certificates, storage
from .common import now, write_outcome
from .context import ClusterContext
from .rolling import apply_dynamic_configs, roll_step
from .scaling import ScaleDecision, scale_step

# The chart's node-reader ClusterRole of this release (named per release).
NODE_READER_ROLE = os.environ.get("RILLET_NODE_READER_ROLE") or names.NODE_READER_ROLE


class Refused(Exception):
    """The Cluster cannot be applied as it stands: the pass stops and says why in Ready (an
    error, with `reason`); nothing after the refusing step is changed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class ClusterReconciler:
    """One pass over one Cluster; made per pass, never reused.

    Holds what Kopf handed the pass (the resource, the status it started from, the patch, the
    logger) and what its steps find, each set by one step: the cluster id, the parsed spec,
    the way to the brokers (`ctx`), the scale that runs (`running`), the brokers' state. The
    handler runs it under the Cluster's lock (common.lock), so passes never interleave.
    """

    def __init__(self, body: Any, meta: Any, spec: Any, status: dict, name: str, namespace: str,
                 patch: kopf.Patch, logger: Any, kube: Kube) -> None:
        self.body = body
        self.meta = meta
        self.raw_spec = spec
        self.status = status
        self.name = name
        self.namespace = namespace
        self.patch = patch
        self.logger = logger
        self.kube = kube
        self.generation: int = meta.get("generation") or 0
        self.cluster_id = ""
        self.cert_hash = ""
        self._spec: ClusterSpec | None = None
        self._ctx: ClusterContext | None = None
        self._running: ClusterContext | None = None
        self._decision: ScaleDecision | None = None
        self.brokers: list[dict] = []
        self.rolling: Outcome | None = None
        self.unreachable: Step | None = None
        # The external listeners' Services as the API server has them, by name, and the
        # addresses of every node (what a broker on a nodeport listener may advertise).
        self.external_services: dict[str, dict] = {}
        self.node_addresses: list[str] = []
        self.listener_pending: Step | None = None
        self.storage: Step | None = None     # the claims' growth (condition StorageResize)

    async def reconcile(self) -> None:
        try:
            await self.ensure_cluster_id()
            self.parse_spec()
            await self.check_listener_mode()
            await self.external_listeners()
            await self.certificates()
            await self.scale()
            await self.owned_objects()
            await self.grow_storage()
            await self.rack_binding()
        except Refused as refused:
            self.write(Outcome(False, refused.reason, refused.message, error=True))
            return
        await self.broker_status()
        await self.roll_and_dynamic_configs()
        self.write(self.outcome())

    # -- what the steps set, for the steps after them

    @property
    def spec(self) -> ClusterSpec:
        assert self._spec is not None, "parse_spec runs first"
        return self._spec

    @property
    def ctx(self) -> ClusterContext:
        """The pass as the scaling step sees it: the spec as asked."""
        assert self._ctx is not None, "certificates runs first"
        return self._ctx

    @property
    def running(self) -> ClusterContext:
        """The pass over the brokers that run now (scaling decides how many)."""
        assert self._running is not None, "scale runs first"
        return self._running

    @property
    def decision(self) -> ScaleDecision:
        assert self._decision is not None, "scale runs first"
        return self._decision

    # -- the steps, in order

    async def ensure_cluster_id(self) -> None:
        """Generated once and kept in status; written before anything uses it, so a broker's
        storage is never formatted with an id the status does not hold."""
        self.cluster_id = self.status.get("clusterId") or await self._new_cluster_id()
        self.patch.status["clusterId"] = self.cluster_id

    async def _new_cluster_id(self) -> str:
        k = self.kube
        existing = await asyncio.to_thread(k.get, "ConfigMap", names.config_map(self.name),
                                           self.namespace)
        found = None
        for line in ((existing or {}).get("data") or {}).get("server.properties",
                                                             "").splitlines():
            if line.startswith("cluster.id="):
                found = line.split("=", 1)[1].strip()
        cluster_id = found or new_cluster_id()
        await asyncio.to_thread(k.patch, "Cluster", self.name,
                                {"status": {"clusterId": cluster_id}}, self.namespace, "status")
        return cluster_id

    def parse_spec(self) -> None:
        try:
            spec = parse_cluster(self.name, self.namespace, dict(self.raw_spec))
            bc.validate(spec, self.cluster_id)
        except SpecError as exc:
            raise Refused(exc.reason, str(exc)) from None
        except bc.InvalidConfig as exc:
            raise Refused("InvalidConfig", str(exc)) from None
        self._spec = spec

    async def check_listener_mode(self) -> None:
        """Listeners cannot be added to or removed from running brokers (bc.mode_change)."""
        rendered = await asyncio.to_thread(self.kube.get, "ConfigMap",
                                           names.config_map(self.name), self.namespace)
        refusal = bc.mode_change(self.spec, ((rendered or {}).get("data") or {}).get(
            "server.properties"))
        if refusal:
            raise Refused("ListenersChangeUnsupported", refusal)

    async def external_listeners(self) -> None:
        """The Services of the external listeners, for every broker that runs or is asked
        for; those of brokers or listeners gone are deleted. Read back for what the API
        server assigned (nodePorts, load balancer addresses), which the brokers advertise."""
        k = self.kube
        had_external = any("type" in l for l in self.status.get("listeners") or ())
        if not listeners.external(self.spec) and not had_external:
            return
        cs = dataclasses.replace(self.spec, replicas=max(
            self.spec.replicas, int(self.status.get("replicas") or 0)))
        wanted = listeners.services(cs)
        for obj in wanted:
            kopf.append_owner_reference(obj, owner=self.body)
            await self._apply(obj)
        keep = {o["metadata"]["name"] for o in wanted}
        try:
            found = await asyncio.to_thread(k.list, "Service", self.namespace,
                                            {names.LABEL_CLUSTER: self.name})
            for svc in found:
                name = svc["metadata"]["name"]
                if listeners.LABEL_LISTENER not in (svc["metadata"].get("labels") or {}):
                    continue
                if name in keep:
                    self.external_services[name] = svc
                elif await asyncio.to_thread(k.delete, "Service", name, self.namespace):
                    self.logger.info("deleted Service %s: its listener or broker is gone", name)
            if any(l.tls and l.type == "nodeport" for l in listeners.external(cs)):
                self.node_addresses = sorted({a for n in await asyncio.to_thread(k.list, "Node")
                                              for a in listeners.node_addresses(n)})
        except ApiError as exc:
            raise Refused("ApplyFailed", str(exc)) from None

    async def certificates(self) -> None:
        """A secured cluster's CAs and certificates, and the operator's way to the brokers."""
        cs = self.spec
        if cs.secured:
            try:
                issued = await certificates.ensure(
                    cs, self.meta, self.status, self.body, self.logger,
                    listeners.certificate_names(cs, self.external_services,
                                                self.node_addresses))
            except (certificates.CertificateError, ApiError) as exc:
                raise Refused(getattr(exc, "reason", "CertificateError"), str(exc)) from None
            self.cert_hash = issued.broker_fingerprint
            self.patch.status["certificates"] = issued.status
            self.users_waiting(issued.users_waiting)
            target = access.secured_target(cs, issued.operator, issued.cluster_ca_pem)
        else:
            self.users_waiting(())
            target = await access.target(cs)
        self._ctx = ClusterContext(cs, self.body, self.meta, self.status, self.patch,
                                   self.logger, self.kube, target)

    def users_waiting(self, lagging: tuple[rollover_users.LaggingUser, ...] | None) -> None:
        """The condition naming the tls Users a CA rollover step waits for (or False once none
        does), into the conditions the pass writes, with an Event when it changes (not every
        pass)."""
        changed = rollover_users.waiting_conditions(self.status.get("conditions"), lagging,
                                                    now())
        if changed is None:
            return
        self.status["conditions"] = changed
        self.patch.status["conditions"] = changed
        cond = get_condition(changed, CERT_ROLLOVER_WAITING) or {}
        kopf.info(self.body, reason=cond.get("reason", ""), message=cond.get("message", ""))
        self.logger.info("%s: %s", cond.get("reason"), cond.get("message"))

    async def scale(self) -> None:
        """How many broker pods to run now: scaling decides (never fewer than hold data)."""
        self._decision = await scale_step(self.ctx)
        self._running = self.ctx.with_replicas(self._decision.statefulset_replicas)

    async def owned_objects(self) -> None:
        advertised = listeners.advertised_table(self.running.spec, self.external_services)
        waiting = listeners.pending_brokers(advertised)
        if waiting:
            self.listener_pending = Step(
                "ListenerAddressPending", f"no outside address yet for {', '.join(waiting)} "
                f"(listener/broker): they advertise their in-cluster names there meanwhile")
        for obj in builders.owned_objects(self.running.spec, self.cluster_id,
                                          bc.admin_http_supported(), self.cert_hash,
                                          advertised):
            if obj["kind"] == "StatefulSet" and obj["spec"].get("volumeClaimTemplates"):
                obj = storage_growth.keep_claim_template(obj, await asyncio.to_thread(
                    self.kube.get, "StatefulSet", obj["metadata"]["name"], self.namespace))
            kopf.append_owner_reference(obj, owner=self.body)
            await self._apply(obj)

    async def grow_storage(self) -> None:
        """The brokers' claims grown to spec.storage.size, one at a time, where their class
        allows it (storage_growth.py); status.storage has each claim's capacity."""
        try:
            found = await storage.grow_step(self.kube, self.running.spec, self.body,
                                            self.logger)
        except ApiError as exc:
            raise Refused("ApplyFailed", str(exc)) from None
        if found is not None:
            growth, claims = found
            self.storage = growth.step
            self.patch.status["storage"] = storage_growth.status(growth, claims)

    async def rack_binding(self) -> None:
        if not self.spec.rack_topology_key:
            return
        binding = builders.rack_binding(self.spec, NODE_READER_ROLE)
        try:
            # Cluster-scoped, so it cannot be owned by the Cluster: the namespace owns it (it
            # goes with the namespace), and the delete handler removes it with the Cluster.
            ns = await asyncio.to_thread(self.kube.get, "Namespace", self.namespace)
            if ns:
                kopf.append_owner_reference(binding, owner=ns, controller=False,
                                            block_owner_deletion=False)
        except ApiError as exc:
            raise Refused("ApplyFailed", str(exc)) from None
        await self._apply(binding)

    async def broker_status(self) -> None:
        """Each broker's pod, node and rack, the listeners and bootstrap address, in status."""
        k, running = self.kube, self.running.spec
        pods = {p["metadata"]["name"]: p for p in await asyncio.to_thread(
            k.list, "Pod", self.namespace, names.selector_labels(self.name))}
        node_labels: dict[str, dict] = {}
        for node in {(p.get("spec") or {}).get("nodeName") for p in pods.values()} - {None}:
            got = await asyncio.to_thread(k.get, "Node", node)
            node_labels[node] = ((got or {}).get("metadata") or {}).get("labels") or {}
        self.brokers = cluster_status.brokers(running, pods, node_labels)
        self.patch.status["brokers"] = self.brokers
        self.patch.status["readyBrokers"] = sum(1 for b in self.brokers
                                                if b["state"] == "Ready")
        self.patch.status["replicas"] = self.decision.statefulset_replicas
        found = cluster_status.listeners(self.spec)
        host_ips = sorted({ip for p in pods.values()
                           for ip in [(p.get("status") or {}).get("hostIP")] if ip})
        outside = listeners.status(self.spec, self.external_services, host_ips)
        for entry in found:
            if entry["name"] in outside:   # its address outside, not its in-cluster one
                del entry["bootstrapServers"]
                entry.update(outside[entry["name"]])
        self.patch.status["listeners"] = found
        # In-cluster: the first listener's bootstrap Service.
        self.patch.status["bootstrapServers"] = names.listener_bootstrap(
            self.name, self.namespace, found[0]["port"])

    async def roll_and_dynamic_configs(self) -> None:
        """One step of a rolling restart; the dynamic configs once every broker is ready."""
        try:
            self.rolling = await roll_step(self.running)
            if cluster_status.outcome(self.running.spec, self.brokers).ready:
                await apply_dynamic_configs(self.running)
        except (KafkaClientError, OSError, asyncio.TimeoutError) as exc:
            # Every pass while it lasts: DEBUG; Reconciling says it. Ready stays what the
            # brokers' readiness says (they report registered and caught up): it is the
            # operator's way in that fails, which a restart or a roll's next step waits for.
            self.logger.debug("cluster %s not reachable for restarts or configs: %s",
                              self.name, exc)
            self.rolling = None
            self.unreachable = Step("ClusterNotReachable",
                                    f"the operator cannot reach the brokers for restarts and "
                                    f"configs: {type(exc).__name__}: {exc}")

    def outcome(self) -> Outcome:
        """Ready and Reconciling from what serves, what rolls, what scales and what warns."""
        running = self.running.spec
        was_ready = (get_condition(self.status.get("conditions") or [], READY) or {}).get(
            "status")
        serves = cluster_status.serving(running, self.brokers, _new_brokers(
            self.patch.status.get("scaling", self.status.get("scaling"))),
            established=was_ready == "True")
        return cluster_status.combine(serves, self.rolling, self.decision.outcome,
                                      bc.config_warnings(self.spec),
                                      self.unreachable or self.listener_pending or (
                                          self.storage if self.storage and
                                          self.storage.reason == storage_growth.RESIZING
                                          else None),
                                      self.storage)

    def write(self, outcome: Outcome) -> None:
        write_outcome(self.patch, self.status, outcome, self.generation, self.body,
                      self.logger, CLUSTER_TRACKED)

    async def _apply(self, obj: dict) -> None:
        """Creates or brings an owned object in line (a failure refuses the pass: ApplyFailed).
        Created and corrected (someone else changed it) objects get an Event; an update the
        operator itself wants (after a spec change or a scaling step, which have their own
        Events) gets a log line."""
        what = f"{obj['kind']} {obj['metadata']['name']}"
        try:
            result, paths = await asyncio.to_thread(self.kube.apply, obj)
        except ApiError as exc:
            raise Refused("ApplyFailed", str(exc)) from None
        changed = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5
                                          else "")
        if result == "created":
            kopf.info(self.body, reason="Created", message=f"created {what}")
            self.logger.info("created %s", what)
        elif result == "corrected":
            kopf.warn(self.body, reason="Corrected", message=f"{what} was changed outside the "
                                                             f"operator ({changed}): put back")
            self.logger.warning("corrected %s, changed outside the operator (%s)", what,
                                changed)
        elif result == "updated":
            self.logger.info("updated %s (%s)", what, changed)


def _new_brokers(scaling: dict | None) -> frozenset[int]:
    """Brokers a scale-up is still adding: not yet part of what the cluster serves with."""
    scaling = scaling or {}
    low, high = scaling.get("from"), scaling.get("to")
    if scaling.get("phase") in (None, "Done") or low is None or high is None or high <= low:
        return frozenset()
    return frozenset(range(int(low), int(high)))
