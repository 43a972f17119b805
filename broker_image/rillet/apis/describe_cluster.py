"""DescribeCluster (key 60), v0-1: brokers, controller, cluster id. Flexible only.

v1: endpoint type; asking for controller endpoints gets UNSUPPORTED_ENDPOINT_TYPE
(in combined mode the brokers are the controllers).

Any principal may ask, as in Kafka (kafka-get-offsets and kafka-cluster send it for users
without cluster ACLs); DESCRIBE on the cluster decides only what
cluster_authorized_operations says when it is asked for: the operations allowed, else none.
"""
from __future__ import annotations

from typing import Any

from ..protocol import errors
from .registry import CLUSTER, OPERATIONS_UNSET, RequestContext, api


@api(key=60, versions=(0, 1))
async def describe_cluster(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    image = broker.image
    if getattr(req, "endpoint_type", 1) != 1:
        return ctx.response({"throttle_time": 0, "error_code": errors.UnsupportedEndpointType.code,
                             "error_message": "only broker endpoints are served",
                             "cluster_id": broker.cluster_id, "brokers": []})
    operations = ctx.authorized_operations("CLUSTER", CLUSTER) \
        if req.include_cluster_authorized_operations else OPERATIONS_UNSET
    brokers = [{"broker_id": b.node_id, "host": host, "port": port, "rack": b.rack}
               for b, host, port in image.brokers_for(ctx.session.listener_name)]
    return ctx.response({"throttle_time": 0, "error_code": 0, "error_message": None,
                         "cluster_id": broker.cluster_id,
                         "controller_id": broker.controller_id_for_clients(),
                         "brokers": brokers, "cluster_authorized_operations": operations})
