"""The fuzz corpus is what it says: whole recorded frames from each client, every API covered."""
from __future__ import annotations

from rillet.protocol.codec import FramingError, decode_request
from tests.fuzz import corpus

CLIENTS = ("java", "librdkafka", "kafka-python", "aiokafka")


def test_every_recording_is_whole_frames():
    for listener in corpus.LISTENERS:
        for path in sorted(corpus.CORPUS_DIR.glob(f"*-{listener}.frames")):
            data = path.read_bytes()
            frames = corpus.split_frames(data)
            assert frames and sum(len(f) for f in frames) == len(data), path


def test_each_client_and_rillet_nodes_are_recorded():
    client = corpus.load("client")
    for source in CLIENTS:
        assert len(client.get(source, [])) >= 20, f"no recording of {source}"
    assert len(corpus.load("controller").get("rillet", [])) >= 20


def test_recorded_frames_decode_before_they_are_mutated():
    """A campaign starts from requests a broker reads: mutating garbage tests little."""
    undecodable = []
    for source, frames in corpus.load("client").items():
        for frame in frames:
            key, version = corpus.api_of(frame)
            if key == 0 and version < 3:
                continue  # Produce v0-2: no kio schema; answered by a hand parser
            try:
                decode_request(frame[4:])
            except FramingError as exc:
                undecodable.append((source, key, version, str(exc)[:80]))
    assert not undecodable, undecodable[:5]


def test_every_api_served_is_recorded_from_real_traffic():
    """Every API key served has recorded frames (the Java tools, the clients, rillet's own
    nodes; a controller listener also gets client traffic in a campaign); only versions no
    client sends are left to synthesized frames."""
    recorded = {key for listener in corpus.LISTENERS
                for frames in corpus.load(listener).values()
                for key, _ in corpus.coverage(frames)}
    for listener in corpus.LISTENERS:
        missing = {key for key, _ in corpus.served(listener)} - recorded
        assert not missing, (listener, sorted(missing))


def test_the_pools_reach_every_api_version_served_with_frames_that_decode():
    pools = corpus.pools()
    for listener in corpus.LISTENERS:
        missing = set(corpus.served(listener)) - set(corpus.coverage(pools[listener]))
        assert not missing, (listener, sorted(missing))
    for frame in corpus.synthesized([p for p in corpus.served("controller") if p[0] != 0]):
        decode_request(frame[4:])
