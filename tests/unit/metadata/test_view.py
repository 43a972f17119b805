"""MetadataView.wait_until: woken by a published image, bounded by its timeout."""
from __future__ import annotations

import asyncio

from rillet.metadata.delta import between
from rillet.metadata.image import MetadataImage
from rillet.metadata.view import MetadataView


def test_a_waiter_wakes_when_an_image_shows_what_it_waits_for() -> None:
    async def run() -> tuple[bool, float]:
        images = [MetadataImage(cluster_id="a")]
        view = MetadataView(lambda: images[-1])
        loop = asyncio.get_running_loop()

        def publish(cluster_id: str) -> None:
            old = images[-1]
            images.append(MetadataImage(cluster_id=cluster_id))
            view.on_metadata_update(between(old, images[-1], 0), images[-1])

        loop.call_later(0.01, publish, "b")     # not yet what the waiter wants
        loop.call_later(0.02, publish, "c")
        started = loop.time()
        ok = await view.wait_until(lambda image: image.cluster_id == "c", 5.0)
        return ok, loop.time() - started

    ok, took = asyncio.run(run())
    assert ok and took < 1.0


def test_a_waiter_gives_up_at_its_timeout_and_one_already_satisfied_does_not_wait() -> None:
    async def run() -> tuple[bool, bool]:
        view = MetadataView(lambda: MetadataImage(cluster_id="a"))
        never = await view.wait_until(lambda image: image.cluster_id == "z", 0.05)
        at_once = await view.wait_until(lambda image: image.cluster_id == "a", 0.0)
        return never, at_once

    assert asyncio.run(run()) == (False, True)
