"""Past one machine: `build --all`, `ab` and `bisect` on a Ray cluster named by `--cluster ADDRESS` (or
STACKCTL_CLUSTER). Without one nothing here is imported and everything runs in this process. Ray is imported only
inside this stage, and only once a cluster is named; the nodes run tasks of small values (profiles, locks, plans),
and the registry is the only state they share.

The names below are the stage's API; each is imported from its module on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:
    from stackctl.cluster.ab import ClusterTrials, task_records
    from stackctl.cluster.address import ClusterAddress, cluster_address, connect, parse_address
    from stackctl.cluster.tasks import ENGINE_RESOURCE, NodeOffer, RayCluster, Task, TaskOutcome

__all__ = [
    "ENGINE_RESOURCE",
    "ClusterAddress",
    "ClusterTrials",
    "NodeOffer",
    "RayCluster",
    "Task",
    "TaskOutcome",
    "cluster_address",
    "connect",
    "parse_address",
    "task_records",
]

__getattr__ = lazy_api(__name__, {
    "ab": ("ClusterTrials", "task_records"),
    "address": ("ClusterAddress", "cluster_address", "connect", "parse_address"),
    "tasks": ("ENGINE_RESOURCE", "NodeOffer", "RayCluster", "Task", "TaskOutcome"),
})
