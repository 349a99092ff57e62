"""Markdown pages for the figures: one renderer per script, fed the facts it recorded.

The renderers live by figure family (figrender_routing, figrender_failover, figrender_storm)
on shared helpers (figrender_common)."""

from figrender_failover import kill_worker
from figrender_routing import multi_replica, routing_quality, slow_worker_migration
from figrender_storm import recovery_storm

RENDERERS = {
    "worker_add_storm": recovery_storm,
    "multi_replica": multi_replica,
    "routing_quality": routing_quality,
    "kill_worker": kill_worker,
    "slow_worker_migration": slow_worker_migration,
}
