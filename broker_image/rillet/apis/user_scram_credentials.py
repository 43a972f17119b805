"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0.

What `kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-512=[password=..]'`
sends: the client salts and hashes the password, the controller keeps StoredKey and
ServerKey in the metadata log. Describing needs DESCRIBE on the cluster, altering ALTER
(when an authorizer is on). Describe answers mechanisms and iteration counts, never keys.
"""
from __future__ import annotations

from typing import Any

from ..controller.security import ScramChange
from ..protocol import errors
from ..defs.sasl import SCRAM_CODES
from .registry import RequestContext, api

CLUSTER = ("CLUSTER", "kafka-cluster")


@api(key=50, versions=(0, 0))
async def describe_user_scram_credentials(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorized("DESCRIBE", *CLUSTER):
        return ctx.response({"throttle_time": 0, "results": [],
                             "error_code": errors.ClusterAuthorizationFailed.code,
                             "error_message": "DESCRIBE on the cluster is not allowed"})
    by_user: dict[str, list[dict[str, int]]] = {}
    for (user, mechanism), cred in sorted(ctx.broker.image.scram.items()):
        by_user.setdefault(user, []).append({"mechanism": SCRAM_CODES[mechanism],
                                             "iterations": cred.iterations})
    wanted = sorted(by_user) if req.users is None else [u.name for u in req.users]
    results = []
    for user in dict.fromkeys(wanted):
        found = by_user.get(user)
        if found is None:
            results.append({"user": user, "error_code": errors.ResourceNotFound.code,
                            "error_message": f"{user} has no SCRAM credentials",
                            "credential_infos": []})
        else:
            results.append({"user": user, "error_code": 0, "error_message": None,
                            "credential_infos": found})
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "results": results})


@api(key=51, versions=(0, 0), forward=True)
async def alter_user_scram_credentials(ctx: RequestContext, req: Any) -> Any:
    changes = [ScramChange(d.name, int(d.mechanism)) for d in req.deletions]
    changes += [ScramChange(u.name, int(u.mechanism), u.iterations, bytes(u.salt),
                            bytes(u.salted_password)) for u in req.upsertions]
    users = list(dict.fromkeys(c.user for c in changes))
    if not ctx.authorized("ALTER", *CLUSTER):
        denied = errors.ClusterAuthorizationFailed("ALTER on the cluster is not allowed")
        outcome: dict[str, Any] = dict.fromkeys(users, denied)
    else:
        try:
            outcome = await ctx.broker.controller.alter_scram_credentials(changes)
        except Exception as exc:   # the controller could not decide: every user says why
            outcome = dict.fromkeys(users, exc)
    return ctx.response({"throttle_time": 0, "results": [
        {"user": user, "error_code": 0 if outcome[user] is None else
         errors.code_of(outcome[user], "alter SCRAM credentials"),
         "error_message": None if outcome[user] is None else errors.message_of(outcome[user])}
        for user in users]})
