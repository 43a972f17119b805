"""SASL mechanism names and what a SASL listener's settings need (`check_mechanisms`).

Shared: the broker checks its listeners with it at config load and serves these mechanisms
(security/sasl.py); the operator loads a Cluster's would-be config with the same checks and
names SCRAM mechanisms by Kafka's wire codes (rillet.client.security).
"""
from __future__ import annotations

import re
from typing import Any

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SCRAM_MECHANISMS = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}   # Kafka's wire codes
SCRAM_CODES = {name: code for code, name in SCRAM_MECHANISMS.items()}
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SaslConfigError(ValueError):
    pass


def parse_jaas_users(text: str) -> dict[str, str]:
    """The `user_<name>="<password>"` options of a PlainLoginModule JAAS line."""
    options = {k: v.replace('\\"', '"').replace("\\\\", "\\")
               for k, v in _JAAS_OPTION.findall(text)}
    return {k[len("user_"):]: v for k, v in options.items() if k.startswith("user_")}


def enabled_mechanisms(settings: Any) -> list[str]:
    return [m.upper() for m in settings["sasl.enabled.mechanisms"]]


def check_mechanisms(settings: Any) -> None:
    """A SASL listener's mechanisms exist in rillet, and PLAIN has its users."""
    mechanisms = enabled_mechanisms(settings)
    if not mechanisms:
        raise SaslConfigError("sasl.enabled.mechanisms is empty")
    for mechanism in mechanisms:
        if mechanism not in (PLAIN, *SCRAM_CODES):
            raise SaslConfigError(f"SASL mechanism {mechanism} is not available in rillet "
                                  f"(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are)")
    if PLAIN in mechanisms:
        jaas = settings.jaas(PLAIN)
        if not jaas or not parse_jaas_users(jaas):
            raise SaslConfigError(
                f"PLAIN needs listener.name.{settings.name.lower()}.plain.sasl.jaas.config "
                f"with user_<name>=\"<password>\" entries")
