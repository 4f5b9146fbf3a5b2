"""Past one machine: `build --all`, `ab` and `bisect` on a Ray cluster named by `--cluster ADDRESS` (or
STACKCTL_CLUSTER). Without one nothing here is imported and everything runs in this process. Ray is imported only
inside this stage, and only once a cluster is named; the nodes run tasks of small values (profiles, locks, plans),
and the registry is the only state they share.

The names imported below are the stage's API; each is imported from its module on first use
(stackctl/base/lazy.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackctl.base.lazy import lazy_api

if TYPE_CHECKING:  # the stage's API, one import a name: mypy reads it, and so does `lazy_api`
    from stackctl.cluster.ab import ClusterTrials as ClusterTrials
    from stackctl.cluster.ab import task_records as task_records
    from stackctl.cluster.address import ClusterAddress as ClusterAddress
    from stackctl.cluster.address import cluster_address as cluster_address
    from stackctl.cluster.address import connect as connect
    from stackctl.cluster.address import parse_address as parse_address
    from stackctl.cluster.tasks import ENGINE_RESOURCE as ENGINE_RESOURCE
    from stackctl.cluster.tasks import NodeOffer as NodeOffer
    from stackctl.cluster.tasks import RayCluster as RayCluster
    from stackctl.cluster.tasks import Task as Task
    from stackctl.cluster.tasks import TaskOutcome as TaskOutcome

if not TYPE_CHECKING:  # for mypy, the imports above are the package's names; nothing else is
    __getattr__ = lazy_api(__name__)
