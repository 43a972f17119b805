"""This node's view of the cluster metadata: the image its controller replays, and a bounded
wait for that image to show something ("wait until my own view has the topic the controller
just created").

The image is owned by the controller (replaced whole on every committed step); the view
only reads it and is woken by the controller's change listener, so a waiter costs nothing
until an image changes. Event loop only.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from .delta import MetadataDelta
from .image import MetadataImage

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

    @property
    def image(self) -> MetadataImage:
        return self._image()

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """The controller's listener: a new image was published."""
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
