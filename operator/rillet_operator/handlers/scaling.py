"""Scaling a Cluster and rebalancing its replicas: the I/O around planner.py, scale_safety.py
and rebalance.py.

Each reconcile pass reads the real state (StatefulSet, Metadata, ongoing reassignments, log
sizes) and moves the state kept in `status.scaling` and `status.rebalance` one step:

- scale up (spec.replicas above the StatefulSet's): the StatefulSet grows at once; once every
  new broker is registered, a rack-aware rebalance onto all brokers is planned and carried out
  in batches under a replication throttle;
- scale down: refused with ScaleDownUnsafe (nothing changed) when the remaining brokers could
  not hold some topic; otherwise every replica is first moved off the brokers that go (the
  highest ordinals), then the StatefulSet shrinks, the removed brokers are unregistered once
  their pods are gone, and their claims are deleted when spec.storage.deleteClaim says so;
- annotation `rillet.io/rebalance` (any new value): one rebalance without scaling.

The StatefulSet's replica count is decided here and nowhere else, so the cluster handler never
shrinks it under brokers that still hold data.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import kopf
from rillet.client import AdminClient, KafkaClientError
from rillet.protocol import errors

from .. import planner, rebalance, scale_safety
from ..builders import names
from ..conditions import Outcome
from ..kube import ApiError
from ..spec import ClusterSpec
from .common import now, replacing
from .context import ClusterContext

REBALANCE_ANNOTATION = "rillet.io/rebalance"
ADMIN_TIMEOUT_S = 15.0
THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
THROTTLE_REPLICAS = ("leader.replication.throttled.replicas",
                     "follower.replication.throttled.replicas")


@dataclass(frozen=True)
class ScaleDecision:
    statefulset_replicas: int
    outcome: Outcome | None = None   # None: no scaling or rebalance under way


async def scale_step(ctx: ClusterContext) -> ScaleDecision:
    cs, status, patch = ctx.spec, ctx.status, ctx.patch
    sts = await asyncio.to_thread(ctx.kube.get, "StatefulSet", names.statefulset(cs.name),
                                  cs.namespace)
    if sts is None:
        return ScaleDecision(cs.replicas)
    current = int((sts.get("spec") or {}).get("replicas") or cs.replicas)
    scaling = dict(status.get("scaling") or {})
    plan_cm = await asyncio.to_thread(ctx.kube.get, "ConfigMap", names.rebalance_plan(cs.name),
                                      cs.namespace)
    state = rebalance.load(plan_cm, status.get("rebalance"))
    token = ctx.annotation(REBALANCE_ANNOTATION)

    if cs.replicas > current and names.voter_count(cs.replicas) != names.voter_count(current):
        return ScaleDecision(current, Outcome(
            False, "ScaleUpUnsupported",
            f"the controller quorum has {names.voter_count(current)} voters (ordinals "
            f"0..{names.voter_count(current) - 1}) and its voters are fixed; {cs.replicas} "
            f"brokers would change them", error=True))

    if cs.replicas > current:
        scaling = {"from": current, "to": cs.replicas, "phase": "WaitingForBrokers"}
        kopf.info(ctx.body, reason="ScaleUp", message=f"{current} -> {cs.replicas} brokers")
        patch.status["scaling"] = scaling
        return ScaleDecision(cs.replicas, Outcome(
            False, "ScalingUp", f"starting brokers {list(range(current, cs.replicas))}",
            reconciling=True))
    requested = bool(token and token != status.get("rebalanceToken"))
    busy = state.phase in ("Planned", "Moving") or scaling.get("phase") not in (None, "Done")
    if cs.replicas == current and not busy and not requested:
        return ScaleDecision(current)
    try:
        async with ctx.target.admin(ADMIN_TIMEOUT_S) as admin:
            if cs.replicas < current:
                refusal = await _scale_down_refusal(admin, cs, current)
                if refusal:
                    return ScaleDecision(current, Outcome(False, "ScaleDownUnsafe", refusal,
                                                          error=True))
                if scaling.get("to") != cs.replicas:
                    scaling = {"from": current, "to": cs.replicas, "phase": "Draining"}
                    kopf.info(ctx.body, reason="ScaleDown", message=f"draining brokers "
                              f"{scale_safety.removed_brokers(current, cs.replicas)} before "
                              f"their pods go")
            if requested and state.phase not in ("Planned", "Moving"):
                patch.status["rebalanceToken"] = token   # asked once: one rebalance
            else:
                requested = False
            return await _advance(ctx, admin, scaling, state, requested, current, plan_cm)
    except (KafkaClientError, OSError, asyncio.TimeoutError) as exc:
        ctx.logger.debug("scaling: cluster not reachable: %s", exc)   # the condition says it once
        # The scale is still what runs (Ready keeps saying whether the brokers serve).
        return ScaleDecision(current, Outcome(False, _scale_reason(scaling, state), f"waiting "
                             f"for the cluster: {type(exc).__name__}: {exc}", reconciling=True))


async def _scale_down_refusal(admin: AdminClient, cs: ClusterSpec, current: int) -> str | None:
    assignment = await admin.assignment()
    rf: dict[str, int] = {}
    for (topic, _), replicas in assignment.items():
        rf[topic] = max(rf.get(topic, 0), len(replicas))
    default_min_isr = int(cs.config_dict.get("min.insync.replicas", "1"))
    min_isr = {}
    for topic in rf:
        overrides = await admin.topic_config_overrides(topic)
        min_isr[topic] = int(overrides.get("min.insync.replicas", default_min_isr))
    return scale_safety.check_scale_down(current, cs.replicas, rf, min_isr,
                                         names.voter_count(current))


async def _observe(admin: AdminClient) -> tuple[rebalance.Observed, dict[int, str | None]]:
    described = await admin.describe_cluster()
    racks = {b: rack for b, (_, _, rack) in described.brokers.items()}
    assignment = await admin.assignment()
    isr = await admin.isr()
    ongoing = {k: tuple(r for r in m.replicas if r not in m.removing)
               for k, m in (await admin.list_partition_reassignments()).items()}
    sizes = await admin.partition_sizes()
    return rebalance.Observed(assignment=assignment, ongoing=ongoing, isr=isr, sizes=sizes,
                              live_brokers=frozenset(racks)), racks


async def _advance(ctx: ClusterContext, admin: AdminClient, scaling: dict,
                   state: rebalance.RebalanceState, requested: bool, current: int,
                   plan_cm: dict | None) -> ScaleDecision:
    """One step of whatever is under way: waiting for new brokers, a move, the removal of
    drained brokers, or a requested rebalance."""
    cs, status, patch, logger = ctx.spec, ctx.status, ctx.patch, ctx.logger
    targets = list(range(min(cs.replicas, current)))
    if scaling.get("to", cs.replicas) > scaling.get("from", cs.replicas):
        targets = list(range(cs.replicas))
    observed, racks = await _observe(admin)
    moving = state.phase in ("Planned", "Moving")
    if cs.replicas == current and scaling.get("to") not in (None, cs.replicas) and \
            scaling.get("phase") in ("Draining", "WaitingForBrokers"):
        # The spec went back to the current size: the scale is off, a move continues with a
        # plan for the brokers that stay (below).
        scaling = {"from": current, "to": cs.replicas, "phase": "Moving" if moving else "Done"}
    phase = scaling.get("phase")

    if phase == "WaitingForBrokers":
        missing = [b for b in targets if b not in racks]
        if missing:
            patch.status["scaling"] = scaling
            return ScaleDecision(current, Outcome(False, "ScalingUp", f"waiting for brokers "
                                                  f"{missing} to register", reconciling=True))
        scaling["phase"] = "Moving"
        state = _start(ctx, "scale-up", targets, observed, racks)
        moving = True
    elif phase == "Draining" and not moving and not _holds_nothing(
            observed, set(range(cs.replicas, current))):
        state = _start(ctx, "scale-down", targets, observed, racks)
        moving = True
    elif not moving and requested:
        state = _start(ctx, "rebalance", targets, observed, racks)
        moving = True
    elif moving and sorted(state.target_brokers) != targets:
        plan = planner.plan_rebalance(_effective(observed), _brokers(targets, racks),
                                      observed.sizes)
        state, cancel = rebalance.replan(state, targets, plan, observed, now())
        if cancel:
            await admin.alter_partition_reassignments({k: None for k in cancel})
            logger.info("cancelled %d moves onto brokers that are no longer targets",
                        len(cancel))

    if moving:
        state, actions = rebalance.step(state, observed, batch_size=cs.rebalance.batch_size,
                                        now=now())
        await _act(ctx, admin, state, actions)
        await _save(ctx, state, plan_cm)
        patch.status["rebalance"] = replacing(status.get("rebalance"), rebalance.summary(
            state, names.rebalance_plan(cs.name)))
        if state.phase in ("Planned", "Moving"):
            patch.status["scaling"] = scaling
            return ScaleDecision(current, Outcome(False, _reason(state), rebalance.progress(
                state), reconciling=True))
        if state.phase == "Failed":
            patch.status["scaling"] = scaling
            return ScaleDecision(current, Outcome(False, "RebalanceFailed", state.reason,
                                                  error=True))
        kopf.info(ctx.body, reason="RebalanceDone", message=rebalance.progress(state))

    if scaling.get("phase") in ("Draining", "Removing") and cs.replicas < current:
        removed = set(range(cs.replicas, current))
        if not _holds_nothing(observed, removed):
            patch.status["scaling"] = scaling
            return ScaleDecision(current, Outcome(False, "ScalingDown", f"brokers "
                                 f"{sorted(removed)} still hold replicas", reconciling=True))
        scaling["phase"] = "Removing"
        patch.status["scaling"] = scaling
        kopf.info(ctx.body, reason="ScaleDown", message=f"brokers {sorted(removed)} hold nothing: "
                                                    f"removing their pods")
        return ScaleDecision(cs.replicas, Outcome(False, "ScalingDown", "removing pods of "
                             f"brokers {sorted(removed)}", reconciling=True))
    if scaling.get("phase") == "Removing":
        left = await _remove_brokers(ctx, admin, scaling)
        if left:
            patch.status["scaling"] = scaling
            return ScaleDecision(current, Outcome(False, "ScalingDown", left,
                                                  reconciling=True))
        scaling["phase"] = "Done"
    elif scaling.get("phase") == "Moving":
        scaling["phase"] = "Done"
    patch.status["scaling"] = scaling or None
    return ScaleDecision(current)


async def _save(ctx: ClusterContext, state: rebalance.RebalanceState,
                loaded: dict | None) -> None:
    """Writes the whole rebalance state to its ConfigMap (owned by the Cluster), after the
    pass's actions, as status was before: a pass that fails to act leaves the old state."""
    cs = ctx.spec
    cm = rebalance.plan_config_map(state, names.rebalance_plan(cs.name), cs.namespace,
                                   names.labels(cs.name))
    if loaded is not None and (loaded.get("data") or {}) == cm["data"]:
        return
    kopf.append_owner_reference(cm, owner=ctx.body)
    k = ctx.kube
    if loaded is None:
        try:
            await asyncio.to_thread(k.create, cm)
            return
        except ApiError as exc:
            if exc.status != 409:
                raise
    await asyncio.to_thread(k.patch, "ConfigMap", cm["metadata"]["name"],
                            {"data": cm["data"]}, cs.namespace)


def _scale_reason(scaling: dict, state: rebalance.RebalanceState) -> str:
    low, high = scaling.get("from"), scaling.get("to")
    if low is not None and high is not None and high != low:
        return "ScalingUp" if high > low else "ScalingDown"
    return _reason(state)


def _reason(state: rebalance.RebalanceState) -> str:
    return {"scale-up": "ScalingUp", "scale-down": "ScalingDown"}.get(state.goal, "Rebalancing")


def _brokers(ids: list[int], racks: dict[int, str | None]) -> list[planner.Broker]:
    return [planner.Broker(b, racks.get(b)) for b in ids]


def _effective(observed: rebalance.Observed) -> dict:
    """The assignment with moves in flight counted at their targets (during a move Metadata
    lists the union of old and new replicas)."""
    return {**observed.assignment, **observed.ongoing}


def _holds_nothing(observed: rebalance.Observed, brokers: set[int]) -> bool:
    return not any(brokers & set(r) for r in observed.assignment.values()) and not any(
        brokers & set(r) for r in observed.ongoing.values())


def _start(ctx: ClusterContext, goal: str, targets: list[int], observed: rebalance.Observed,
           racks: dict[int, str | None]) -> rebalance.RebalanceState:
    current = _effective(observed)
    plan = planner.plan_rebalance(current, _brokers(targets, racks), observed.sizes)
    moves = planner.count_moves(current, plan)
    minimum = planner.minimum_moves(current, targets, racks)
    ctx.logger.info("%s onto brokers %s: %d partitions to change, %d replica moves (minimum "
                    "%d); the plan is in ConfigMap %s", goal, targets, len(plan), moves, minimum,
                    names.rebalance_plan(ctx.name))
    return rebalance.start(goal, targets, plan, observed, now(), moves, minimum)


async def _act(ctx: ClusterContext, admin: AdminClient, state: rebalance.RebalanceState,
               actions: rebalance.Actions) -> None:
    cs, logger = ctx.spec, ctx.logger
    topics = sorted({rebalance.parse_key(k)[0] for k in state.plan})
    if actions.throttle and cs.rebalance.throttle_bytes_per_second:
        rate = str(cs.rebalance.throttle_bytes_per_second)
        await admin.alter_broker_configs(None, {k: rate for k in THROTTLE_RATES})
        for topic in topics:
            await admin.alter_topic_configs(topic, {k: "*" for k in THROTTLE_REPLICAS})
    if actions.cancel:
        await admin.alter_partition_reassignments({k: None for k in actions.cancel})
    if actions.submit:
        codes = await admin.alter_partition_reassignments(
            {k: list(v) for k, v in actions.submit.items()})
        refused = {f"{t}-{p}": c for (t, p), c in codes.items() if c}
        if refused:
            logger.warning("reassignments refused: %s", refused)
        logger.info("submitted %d partition moves", len(actions.submit))
    if actions.clear_throttle:
        await admin.alter_broker_configs(None, {}, THROTTLE_RATES)
        for topic in topics:
            await admin.alter_topic_configs(topic, {}, THROTTLE_REPLICAS)


async def _remove_brokers(ctx: ClusterContext, admin: AdminClient, scaling: dict
                          ) -> str | None:
    """After the StatefulSet shrank: once a removed broker's pod is gone, unregister it and
    delete its claim when the storage spec says so. What is still left, or None."""
    cs, body, logger = ctx.spec, ctx.body, ctx.logger
    removed = list(range(scaling["to"], scaling["from"]))
    k = ctx.kube
    waiting = []
    for b in removed:
        pod = names.pod(cs.name, b)
        if await asyncio.to_thread(k.get, "Pod", pod, cs.namespace):
            waiting.append(pod)
            continue
        # Fenced brokers are not listed live, so ask whatever the listing says; an unknown
        # id means an earlier pass (or someone else) unregistered it already.
        try:
            await admin.unregister_broker(b)
            kopf.info(body, reason="BrokerUnregistered", message=f"broker {b} unregistered")
            logger.info("unregistered broker %d", b)
        except errors.BrokerIdNotRegistered:
            pass
        if cs.storage.type == "persistent-claim" and cs.storage.delete_claim:
            claim = f"data-{pod}"
            try:
                if await asyncio.to_thread(k.delete, "PersistentVolumeClaim", claim,
                                           cs.namespace):
                    kopf.info(body, reason="ClaimDeleted", message=f"deleted {claim}")
            except ApiError as exc:   # e.g. no RBAC for it: say so, keep the scale going
                kopf.warn(body, reason="ClaimDeleteFailed", message=f"{claim}: {exc}")
                logger.warning("cannot delete %s: %s", claim, exc)
    return f"waiting for pods {waiting} to go" if waiting else None
