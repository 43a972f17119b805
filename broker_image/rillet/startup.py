"""Start-up refusals the user can fix: the CLI prints one line, no traceback, and exits 2."""
from __future__ import annotations


class StartupError(Exception):
    """Start-up cannot go on (a log dir in use, a port taken); the message says what to fix."""
