"""Growing the brokers' claims when spec.storage.size grows: what to do this pass. Pure: the
caller passes the claims and whether their StorageClass allows expansion, and patches the one
claim returned.

As Strimzi does: a claim is grown in place (Kubernetes expands the volume, and the file system
on the broker's node, while it runs), one broker at a time: the next claim is patched only once
every claim already asked to grow reports the new capacity. A smaller size is refused (a claim
cannot shrink), and so is growth on a class without `allowVolumeExpansion`: the claims stay as
they are and condition StorageResize says why. A StatefulSet's claim template cannot change
either, so it keeps the size the StatefulSet was made with (`keep_claim_template`); brokers
added later are grown like the others.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .conditions import Step

RESIZING, SHRINK_REFUSED, UNSUPPORTED = "StorageResizing", "StorageShrinkRefused", \
    "StorageExpansionUnsupported"
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity_bytes(text: str) -> int:
    """A Kubernetes storage quantity (256Mi, 1G, 1.5Gi, 1000) in bytes."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([kMGTPE]i?)?", str(text).strip())
    if not m or (m.group(2) or "") not in _UNITS:
        raise ValueError(f"not a storage quantity: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


@dataclass(frozen=True)
class ClaimView:
    """One broker's data claim: the size asked for (spec) and the size it has (status)."""
    name: str
    ordinal: int
    requested: str
    capacity: str | None


@dataclass(frozen=True)
class Growth:
    """This pass's decision: the claim to patch to `size` (None: none), and the condition's
    step (None: every claim has the size asked for)."""
    patch: str | None
    size: str
    step: Step | None

    @property
    def resizing(self) -> bool:
        return self.step is not None and self.step.reason == RESIZING


def claim_view(claim: Mapping) -> ClaimView:
    name = claim["metadata"]["name"]
    return ClaimView(name, int(name.rsplit("-", 1)[1]),
                     str(((claim.get("spec") or {}).get("resources") or {}).get(
                         "requests", {}).get("storage", "0")),
                     ((claim.get("status") or {}).get("capacity") or {}).get("storage"))


def decide(size: str, claims: Sequence[ClaimView], class_name: str | None,
           expandable: bool) -> Growth:
    """What to do for claims of `class_name` (`expandable`: its allowVolumeExpansion) when
    spec.storage.size is `size`."""
    want = quantity_bytes(size)
    bigger = [c for c in claims if quantity_bytes(c.requested) > want]
    if bigger:
        largest = max(bigger, key=lambda c: quantity_bytes(c.requested))
        return Growth(None, size, Step(SHRINK_REFUSED, (
            f"spec.storage.size {size} is smaller than claim {largest.name} "
            f"({largest.requested}): a claim cannot shrink; the claims stay as they are")))
    smaller = sorted((c for c in claims if quantity_bytes(c.requested) < want),
                     key=lambda c: c.ordinal)
    # A claim not bound yet has no capacity and cannot be patched: it waits for its broker.
    growing = [c for c in claims if c.capacity is not None
               and quantity_bytes(c.capacity) < quantity_bytes(c.requested)]
    if smaller and not expandable:
        return Growth(None, size, Step(UNSUPPORTED, (
            f"StorageClass {class_name or '(the default)'} does not allow volume expansion "
            f"(allowVolumeExpansion): claims {', '.join(c.name for c in smaller)} stay at "
            f"{smaller[0].requested}; spec.storage.size {size} is not applied")))
    if not smaller and not growing:
        return Growth(None, size, None)
    if growing:   # one at a time: the next only once this one has its capacity
        c = growing[0]
        return Growth(None, size, Step(RESIZING, (
            f"claim {c.name} grows to {c.requested} (has {c.capacity}); "
            f"{len(smaller)} more to grow to {size}")))
    bound = [c for c in smaller if c.capacity is not None]
    if not bound:
        return Growth(None, size, Step(RESIZING, (
            f"claims {', '.join(c.name for c in smaller)} wait to be bound before they grow "
            f"to {size}")))
    c = bound[0]
    return Growth(c.name, size, Step(RESIZING, (
        f"claim {c.name} grows from {c.requested} to {size}; "
        f"{len(smaller) - 1} more after it")))


def keep_claim_template(statefulset: dict, current: Mapping | None) -> dict:
    """`statefulset` (from the builder) with the claim template size of the StatefulSet that
    exists (`current`): the API server refuses any change to a claim template."""
    templates = (statefulset.get("spec") or {}).get("volumeClaimTemplates")
    had = ((current or {}).get("spec") or {}).get("volumeClaimTemplates")
    if not templates or not had:
        return statefulset
    sizes = {t["metadata"]["name"]: t["spec"]["resources"]["requests"]["storage"]
             for t in had}
    kept = []
    for t in templates:
        t = {**t, "spec": {**t["spec"], "resources": {"requests": {
            "storage": sizes.get(t["metadata"]["name"],
                                 t["spec"]["resources"]["requests"]["storage"])}}}}
        kept.append(t)
    return {**statefulset, "spec": {**statefulset["spec"], "volumeClaimTemplates": kept}}


def status(growth: Growth, claims: Sequence[ClaimView]) -> dict:
    """status.storage: the size asked for and each claim's capacity."""
    return {"size": growth.size,
            "claims": [{"name": c.name, "requested": c.requested,
                        **({"capacity": c.capacity} if c.capacity else {})}
                       for c in sorted(claims, key=lambda c: c.ordinal)]}
