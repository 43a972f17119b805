"""Loaded by every interpreter started with tests/fake_dns_site on PYTHONPATH (tests/fake_dns.py
env()): resolve `.rillet.test` names through the test's map file."""
import os
import sys

if os.environ.get("RILLET_FAKE_DNS"):
    # Appended, not prepended: the repository root holds an `operator` directory that must
    # not shadow the standard library's module of that name.
    sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests.fake_dns import install
    install()
