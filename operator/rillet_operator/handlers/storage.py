"""The claim growth step of a Cluster pass (storage_growth.py decides, this reads the claims
and their StorageClass and patches the one claim decided)."""
from __future__ import annotations

import asyncio
from typing import Any

import kopf

from .. import storage_growth as sg
from ..builders import names
from ..kube import Kube
from ..spec import ClusterSpec


async def grow_step(kube: Kube, spec: ClusterSpec, body: Any, logger: Any
                    ) -> tuple[sg.Growth, list[sg.ClaimView]] | None:
    """This pass's growth of the data claims of the brokers that run (`spec.replicas`; a
    claim kept from a removed broker is left alone), None with ephemeral storage."""
    if spec.storage.type != "persistent-claim" or not spec.storage.size:
        return None
    prefix = f"data-{names.statefulset(spec.name)}-"
    found = [c for c in await asyncio.to_thread(kube.list, "PersistentVolumeClaim",
                                                spec.namespace,
                                                {names.LABEL_CLUSTER: spec.name})
             if c["metadata"]["name"].startswith(prefix)
             and c["metadata"]["name"][len(prefix):].isdigit()
             and int(c["metadata"]["name"][len(prefix):]) < spec.replicas]
    claims = [sg.claim_view(c) for c in found]
    class_name = spec.storage.storage_class or next(
        (c["spec"].get("storageClassName") for c in found
         if c["spec"].get("storageClassName")), None)
    storage_class = await asyncio.to_thread(kube.get, "StorageClass", class_name) \
        if class_name else None
    growth = sg.decide(spec.storage.size, claims, class_name,
                       bool((storage_class or {}).get("allowVolumeExpansion")))
    if growth.patch:
        await asyncio.to_thread(kube.patch, "PersistentVolumeClaim", growth.patch,
                                {"spec": {"resources": {"requests": {"storage": growth.size}}}},
                                spec.namespace)
        message = f"claim {growth.patch} grows to {growth.size}"
        kopf.info(body, reason="StorageResizing", message=message)
        logger.info("%s", message)
    return growth, claims
