"""This node's view of the cluster metadata: the image its controller replays, a bounded
wait for that image to show something ("wait until my own view has the topic the controller
just created"), and what requests derived from its topics (topic_memo.py).

The image is owned by the controller (replaced whole on every committed step); the view
only reads it and is woken by the controller's change listener, so a waiter costs nothing
until an image changes. Event loop only.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from .delta import MetadataDelta
from .image import MetadataImage
from .topic_memo import TopicMemo

ImagePredicate = Callable[[MetadataImage], bool]


class ImageSource(Protocol):
    """Anything that reads this node's current image (a MetadataView, or a test's stand-in)."""

    @property
    def image(self) -> MetadataImage: ...


class MetadataView:
    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image
        # Replaced on every change: the waiters of one image all wake at the next.
        self._changed = asyncio.Event()
        # Kept across images while a topic's object is unchanged (the Metadata API's
        # encoded topic entries); a deleted topic's values go with its delta.
        self.topic_memo = TopicMemo()

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """The controller's listener: a new image was published."""
        self.topic_memo.forget(delta.deleted_topics)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_until(self, predicate: ImagePredicate, timeout: float) -> bool:
        """True once predicate(image) holds, re-checked at each new image; False when
        `timeout` seconds pass first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate(self.image):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                return predicate(self.image)
        return True
