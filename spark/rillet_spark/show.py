"""Print the job's output table.

    python -m rillet_spark.show OUTPUT_DIR [--master local[1]]

Reads through the file sink's metadata log (spark.read.parquet on the sink folder does), so only
files of committed micro-batches are shown: what an exactly-once reader sees.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession

from rillet_spark.events import OUTPUT_COLUMNS
from rillet_spark.session import build_session


def read_output(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.parquet(path).select(*OUTPUT_COLUMNS).orderBy("window_start", "key")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rillet_spark.show", description="print the job's Parquet output")
    p.add_argument("output")
    p.add_argument("--master", default="local[1]")
    p.add_argument("--rows", type=int, default=100)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    spark = build_session("rillet-show-output", master=args.master, shuffle_partitions=1)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        table = read_output(spark, args.output)
        table.show(args.rows, truncate=False)
        print(f"{table.count()} rows")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
