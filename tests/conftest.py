import sys
from pathlib import Path

# `tests.harness` importable from every test module.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
