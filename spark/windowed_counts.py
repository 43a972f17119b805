"""Entry point for spark-submit (and plain `python`): the rillet windowed-counts streaming job.

spark-submit takes a file, not a module, so this file only puts its own folder on sys.path
(the rillet_spark package sits beside it) and calls the job. See rillet_spark/job.py.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rillet_spark.job import main  # noqa: E402  (needs the path above)

if __name__ == "__main__":
    sys.exit(main())
