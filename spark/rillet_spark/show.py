"""Print the job's output table.

    python -m rillet_spark.show OUTPUT_DIR [--master local[1]] [--json]

Reads through the file sink's metadata log (spark.read.parquet on the sink folder does), so only
files of committed micro-batches are shown: what an exactly-once reader sees.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from rillet_spark.events import OUTPUT_COLUMNS
from rillet_spark.session import build_session


def read_output(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.parquet(path).select(*OUTPUT_COLUMNS).orderBy("window_start", "key")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rillet_spark.show", description="print the job's Parquet output")
    p.add_argument("output")
    p.add_argument("--master", default="local[1]")
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--json", action="store_true",
                   help="print every row as one line `RESULT {\"rows\": [...]}` instead of a table")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    spark = build_session("rillet-show-output", master=args.master, shuffle_partitions=1)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        table = read_output(spark, args.output)
        if args.json:
            # formatted by Spark in the session time zone (UTC): collected timestamps would be
            # naive datetimes in this process's local zone
            as_text = table.select(*[F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'").alias(c)
                                     if c in ("window_start", "window_end") else F.col(c)
                                     for c in table.columns])
            print("RESULT " + json.dumps({"rows": [list(r) for r in as_text.collect()]}))
        else:
            table.show(args.rows, truncate=False)
            print(f"{table.count()} rows")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
