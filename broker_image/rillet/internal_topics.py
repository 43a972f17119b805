"""The names of the internal topics the coordinators keep their state in: a leaf module, so
what only needs a name (produce refusing client writes, the broker deciding whether a
coordinator holds state: on_demand.py) does not import the coordinators."""
from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"     # the group coordinator's (coordinator/)
TXN_TOPIC = "__transaction_state"        # the transaction coordinator's (txn/)
