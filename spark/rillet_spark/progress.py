"""What the job says about each micro-batch as it ends: one line on stdout (what `kubectl logs`
of a driver pod shows) and the lag gauges.

A StreamingQueryListener hears each progress when Spark posts it. Polling
`query.recentProgress` instead converts up to 100 reports through py4j on every poll; on a busy
driver one poll then spans several batches, and the gauges jump straight past the values between
(a lag of 300 and 200 never visible, only 100 and 0).
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pyspark.sql.streaming import StreamingQueryListener

from rillet_spark.lag import LagExporter, offsets_behind, source_offset


def progress_line(p: Mapping[str, Any]) -> str:
    # endOffset comes as the source's own JSON text ({"topic": {"0": 12, ...}}), "None" if unknown
    ends = [source_offset(s.get("endOffset")) for s in p.get("sources") or ()]
    return (f"progress: batch {p['batchId']}, {p.get('numInputRows', 0)} input rows, "
            f"watermark {(p.get('eventTime') or {}).get('watermark', '-')}, "
            f"offsets {json.dumps(ends[0] if len(ends) == 1 else ends)}, "
            f"behind latest {sum(offsets_behind(p).values())}")


@dataclass
class BatchReporter:
    """Reports each batch once, whether the listener or the final drain sees it first.

    Spark adds a progress to recentProgress before it posts the event, and posts events in
    order, so the drain holds every batch the listener has yet to hear. Should Spark's listener
    queue overflow and drop an event, that batch goes unreported once a later one is."""

    lag: LagExporter
    last_batch: int = -1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def report(self, progress: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:   # the listener's thread and the main thread's final drain
            for p in progress:
                if p["batchId"] > self.last_batch:
                    self.lag.observe(p)
                    print(progress_line(p), flush=True)
                    self.last_batch = p["batchId"]


class ProgressListener(StreamingQueryListener):
    """Hands each progress of one query (by id) to the reporter, on Spark's listener thread."""

    def __init__(self, reporter: BatchReporter) -> None:
        self.reporter = reporter
        self.query_id: str | None = None

    def onQueryStarted(self, event: Any) -> None:
        # Called synchronously inside start(), before it returns: the first query started after
        # the listener was added is the job's, and no batch of it can end before this.
        if self.query_id is None:
            self.query_id = str(event.id)

    def onQueryProgress(self, event: Any) -> None:
        p = event.progress
        if self.query_id is not None and str(p["id"]) == self.query_id:
            self.reporter.report([p])

    def onQueryIdle(self, event: Any) -> None:
        # An idle query's progress repeats its last batch id; only the drain may see it, and
        # the batchId check skips it there.
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
