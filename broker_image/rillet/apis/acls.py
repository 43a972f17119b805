"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), v1-3: what `kafka-acls` sends.

Bindings live in the metadata log; creating and deleting go to the active controller
(forwarded), describing reads this broker's image. A node that relayed CreateAcls
(DeleteAcls) answers once its own image holds (no longer holds) the bindings (bounded:
dispatch.SETTLE_S). Creating and deleting need ALTER on the cluster, describing DESCRIBE.
v0 (no pattern types) is not served.
"""
from __future__ import annotations

from itertools import groupby
from typing import Any

from ..metadata.image import MetadataImage
from ..protocol import errors
from ..defs.acl import CODES, AclBinding
from ..security.acl import InvalidAcl, binding_from_wire, filter_from_wire
from .registry import RequestContext, api

CLUSTER = ("CLUSTER", "kafka-cluster")


def _filter(f: Any) -> Any:
    return filter_from_wire(int(f.resource_type_filter), f.resource_name_filter,
                            int(f.pattern_type_filter), f.principal_filter, f.host_filter,
                            int(f.operation), int(f.permission_type))


def _wire(b: AclBinding) -> dict[str, Any]:
    return {"resource_type": CODES["resource"][b.resource_type],
            "resource_name": b.resource_name, "pattern_type": CODES["pattern"][b.pattern_type],
            "principal": b.principal, "host": b.host,
            "operation": CODES["operation"][b.operation],
            "permission_type": CODES["permission"][b.permission]}


@api(key=29, versions=(1, 3))
async def describe_acls(ctx: RequestContext, req: Any) -> Any:
    def answer(code: int, message: str | None, resources: list[Any]) -> Any:
        return ctx.response({"throttle_time": 0, "error_code": code, "error_message": message,
                             "resources": resources})
    if not _enabled(ctx):
        return answer(errors.SecurityDisabled.code, "no authorizer is configured", [])
    if not ctx.authorized("DESCRIBE", *CLUSTER):
        return answer(errors.ClusterAuthorizationFailed.code,
                      "DESCRIBE on the cluster is not allowed", [])
    try:
        wanted = _filter(req)
    except InvalidAcl as exc:
        return answer(errors.InvalidRequest.code, str(exc), [])
    found = sorted((b for b in ctx.broker.image.acls if wanted.matches(b)),
                   key=lambda b: tuple(vars(b).values()))
    resources = []
    for (rtype, name, pattern), group in groupby(
            found, key=lambda b: (b.resource_type, b.resource_name, b.pattern_type)):
        acls = [_wire(b) for b in group]
        resources.append({"resource_type": CODES["resource"][rtype], "resource_name": name,
                          "pattern_type": CODES["pattern"][pattern],
                          "acls": [{k: a[k] for k in ("principal", "host", "operation",
                                                      "permission_type")} for a in acls]})
    return answer(0, None, resources)


def _acls_here(image: MetadataImage, req: Any, resp: Any) -> bool:
    """Every binding the controller created is in this node's image, so this node enforces
    it before the client hears it was created (a relayed answer waits: dispatch._settle)."""
    acls = image.acls
    for c, r in zip(req.creations, resp.results):
        if r.error_code:
            continue
        try:
            binding = binding_from_wire(
                int(c.resource_type), c.resource_name, int(c.resource_pattern_type),
                c.principal, c.host, int(c.operation), int(c.permission_type))
        except InvalidAcl:
            continue
        if binding not in acls:
            return False
    return True


@api(key=30, versions=(1, 3), forward=True, settled=_acls_here)
async def create_acls(ctx: RequestContext, req: Any) -> Any:
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    refused = _refusal(ctx)
    for c in req.creations:
        try:
            if refused is not None:
                raise refused
            valid.append(binding_from_wire(
                int(c.resource_type), c.resource_name, int(c.resource_pattern_type),
                c.principal, c.host, int(c.operation), int(c.permission_type)))
            results.append({"error_code": 0, "error_message": None})
        except InvalidAcl as exc:
            results.append({"error_code": errors.InvalidRequest.code, "error_message": str(exc)})
        except errors.KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": exc.message})
    if valid:
        try:
            await ctx.broker.controller.create_acls(valid)
        except Exception as exc:
            code, message = errors.code_of(exc, "create ACLs"), errors.message_of(exc)
            results = [r if r["error_code"] else {"error_code": code, "error_message": message}
                       for r in results]
    return ctx.response({"throttle_time": 0, "results": results})


def _deleted_here(image: MetadataImage, req: Any, resp: Any) -> bool:
    """No binding the controller deleted is left in this node's image."""
    acls = image.acls
    for result in resp.filter_results:
        for a in result.matching_acls:
            try:
                binding = binding_from_wire(
                    int(a.resource_type), a.resource_name, int(a.pattern_type), a.principal,
                    a.host, int(a.operation), int(a.permission_type))
            except InvalidAcl:
                continue
            if binding in acls:
                return False
    return True


@api(key=31, versions=(1, 3), forward=True, settled=_deleted_here)
async def delete_acls(ctx: RequestContext, req: Any) -> Any:
    def failed(code: int, message: str | None) -> dict[str, Any]:
        return {"error_code": code, "error_message": message, "matching_acls": []}
    refused = _refusal(ctx)
    if refused is not None:
        return ctx.response({"throttle_time": 0, "filter_results": [
            failed(refused.code, refused.message) for _ in req.filters]})
    slots: list[dict[str, Any] | None] = []
    filters = []
    for f in req.filters:
        try:
            filters.append(_filter(f))
            slots.append(None)
        except InvalidAcl as exc:
            slots.append(failed(errors.InvalidRequest.code, str(exc)))
    try:
        matches = iter(await ctx.broker.controller.delete_acls(filters))
    except Exception as exc:
        code, message = errors.code_of(exc, "delete ACLs"), errors.message_of(exc)
        return ctx.response({"throttle_time": 0, "filter_results": [
            slot or failed(code, message) for slot in slots]})
    results = [slot or {"error_code": 0, "error_message": None, "matching_acls": [
        {"error_code": 0, "error_message": None, **_wire(b)} for b in next(matches)]}
        for slot in slots]
    return ctx.response({"throttle_time": 0, "filter_results": results})


def _enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def _refusal(ctx: RequestContext) -> errors.KafkaError | None:
    """Why this principal may not change ACLs here, or None."""
    if not _enabled(ctx):
        return errors.SecurityDisabled("no authorizer is configured "
                                       "(authorizer.class.name is empty)")
    if not ctx.authorized("ALTER", *CLUSTER):
        return errors.ClusterAuthorizationFailed("ALTER on the cluster is not allowed")
    return None
