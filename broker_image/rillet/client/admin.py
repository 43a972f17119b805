"""AdminClient: the admin operations of the operator, the CLI and the tests, one object.

Each family of admin APIs is its own module, AdminBase (admin_base.py) holding the
connections they share: the cluster and its brokers (admin_cluster.py: quorum, disks, ISR
health, unregistering), dynamic configs (admin_configs.py), topics and partition moves
(admin_topics.py) and consumer groups with their lag (admin_groups.py).
"""
from __future__ import annotations

from .admin_cluster import ClusterAdmin
from .admin_configs import ConfigAdmin
from .admin_groups import GroupAdmin


class AdminClient(ClusterAdmin, ConfigAdmin, GroupAdmin):
    """Use as `async with AdminClient("127.0.0.1:9092") as admin: ...`.

    `ssl_context`: for an SSL listener (with the client's certificate for mTLS); every
    broker is then dialled with it, as the listener's advertised addresses are."""
