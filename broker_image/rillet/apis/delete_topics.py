"""DeleteTopics (key 20), v1-5.

The topic's metadata record is removed, then every replica deletes its
partition directories. A node that relayed the request answers once its own image
no longer has the topic (bounded: dispatch.SETTLE_S). v4: flexible. v5: error messages.
"""
from __future__ import annotations

from typing import Any

from ..metadata.image import MetadataImage
from ..protocol import errors
from .registry import RequestContext, api


def _gone_here(image: MetadataImage, req: Any, resp: Any) -> bool:
    """No topic the controller deleted is left in this node's image (a relayed answer
    waits for it: dispatch._settle)."""
    topics = image.topics
    return not any(r.name in topics for r in resp.responses if r.error_code == 0)


@api(key=20, versions=(1, 5), forward=True, settled=_gone_here)
async def delete_topics(ctx: RequestContext, req: Any) -> Any:
    out = []
    for name in req.topic_names:
        entry: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
        try:
            ctx.require("DELETE", "TOPIC", name)
            if not ctx.broker.config["delete.topic.enable"]:
                raise errors.TopicDeletionDisabled("delete.topic.enable is false")
            await ctx.broker.controller.delete_topic(name)
        except Exception as exc:
            entry.update(error_code=errors.code_of(exc, "delete topic"),
                         error_message=errors.message_of(exc))
        out.append(entry)
    return ctx.response({"throttle_time": 0, "responses": out})
