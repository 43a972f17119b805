"""Rolling restarts and live config changes for a Cluster: the I/O around roll.py.

- Static config, image, resources or pod template changes make a new StatefulSet revision
  (OnDelete); `roll_step` deletes one outdated pod at a time, only when every pod is ready,
  no partition is under-replicated and no controller voter lags the metadata log, the active
  controller last (roll.py decides).
- A manual roll: `kubectl annotate rlc/NAME rillet.io/roll="$(date +%s)" --overwrite`
  restarts every broker once per new value.
- Dynamic broker configs in spec.config (rillet.defs.dynamic_keys.DYNAMIC_KEYS) are not part of
  the pod template's config hash: `apply_dynamic_configs` sets them as cluster-wide dynamic
  defaults (IncrementalAlterConfigs on the broker resource ""), with no restart.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time

import kopf
from rillet.defs.dynamic_keys import DYNAMIC_KEYS

from .. import roll
from ..builders import names
from ..cluster_status import pod_ready
from ..conditions import Outcome
from ..spec import ClusterSpec
from .common import replacing
from .context import ClusterContext

ROLL_TIMEOUT_S = 600.0
ADMIN_TIMEOUT_S = 15.0
# Set and cleared by rebalances (handlers/scaling.py), never by the config sync.
REBALANCE_OWNED = frozenset({"leader.replication.throttled.rate",
                             "follower.replication.throttled.rate"})


def _pod_view(pod: dict) -> roll.PodView:
    meta = pod["metadata"]
    ready = pod_ready(pod)
    return roll.PodView(meta["name"], int(meta["name"].rsplit("-", 1)[1]),
                        (meta.get("labels") or {}).get("controller-revision-hash", ""),
                        ready, bool(meta.get("deletionTimestamp")), meta.get("uid", ""))


async def roll_step(ctx: ClusterContext) -> Outcome | None:
    """One step of a rolling restart; None when there is nothing to roll."""
    cs, status, k = ctx.spec, ctx.status, ctx.kube
    sts = await asyncio.to_thread(k.get, "StatefulSet", names.statefulset(cs.name),
                                  cs.namespace)
    if not sts:
        return None
    sts_status = sts.get("status") or {}
    if sts_status.get("observedGeneration") != sts["metadata"].get("generation"):
        return None   # the StatefulSet controller has not seen the new template yet
    update_revision = sts_status.get("updateRevision") or ""
    pods = [_pod_view(p) for p in await asyncio.to_thread(
        k.list, "Pod", cs.namespace, names.selector_labels(cs.name))]
    token = ctx.annotation(roll.ROLL_ANNOTATION)
    state = status.get("roll") or {}
    pending = any(p.revision != update_revision for p in pods) or (
        token and token != state.get("token")) or state.get("manualPending") or \
        state.get("phase") in ("Rolling", "Stuck")
    if not pending:
        return None
    async with ctx.target.admin(ADMIN_TIMEOUT_S) as admin:
        # The quorum leader: DescribeCluster names the broker asked, as KRaft brokers do.
        quorum = await admin.describe_quorum()
        urp = len(await admin.under_replicated())
    controller = quorum.leader_id
    lagging = roll.lagging_voters(quorum.voters, quorum.high_watermark)
    d = roll.decide(pods, update_revision, controller, urp, token, state, time.time(),
                    ROLL_TIMEOUT_S, lagging)
    if d.delete:
        await asyncio.to_thread(k.delete, "Pod", d.delete, cs.namespace)
        kopf.info(ctx.body, reason="RollingRestart", message=f"restarting {d.delete} "
                  f"(under-replicated partitions: {urp})")
        ctx.logger.info("rolling restart: deleted %s (controller %s, URP %d)", d.delete,
                    controller, urp)
    ctx.patch.status["roll"] = replacing(status.get("roll"), d.state)
    if d.stuck:
        return Outcome(False, "RollStuck", d.waiting, error=True)
    if d.rolling:
        return Outcome(False, "RollingRestart", d.waiting, reconciling=True)
    if state.get("phase") in ("Rolling", "Stuck"):
        kopf.info(ctx.body, reason="RollingRestartDone",
                  message=f"restarted {', '.join(d.state.get('order') or [])}")
    return None


def dynamic_configs(cs: ClusterSpec) -> dict[str, str]:
    return {k: v for k, v in cs.config if k in DYNAMIC_KEYS}


def dynamic_hash(cs: ClusterSpec) -> str:
    text = json.dumps(dynamic_configs(cs), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def apply_dynamic_configs(ctx: ClusterContext) -> None:
    """Brings the cluster-wide dynamic defaults in line with spec.config's dynamic keys, once
    per change of them (status.dynamicConfigHash); the rebalance throttles are left alone."""
    want_hash = dynamic_hash(ctx.spec)
    if ctx.status.get("dynamicConfigHash") == want_hash:
        return
    want = dynamic_configs(ctx.spec)
    async with ctx.target.admin(ADMIN_TIMEOUT_S) as admin:
        have = await admin.broker_config_overrides(None)
        set_configs = {k: v for k, v in want.items() if have.get(k) != v}
        delete = sorted(k for k in have if k not in want and k not in REBALANCE_OWNED)
        if set_configs or delete:
            await admin.alter_broker_configs(None, set_configs, delete)
            kopf.info(ctx.body, reason="DynamicConfigApplied",
                      message=f"set {sorted(set_configs)}, removed {delete} without restarts")
            ctx.logger.info("dynamic configs: set %s, removed %s", set_configs, delete)
    ctx.patch.status["dynamicConfigHash"] = want_hash
