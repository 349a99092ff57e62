#!/usr/bin/env python3
"""Writes switchyard-dashboard.json. Edit the panels here, then run: python3 generate.py

The gateway test `dashboard_metrics` checks that every switchyard_* name these queries use is
emitted by a running gateway's /metrics.
"""
import json
import os

DS = {"type": "prometheus", "uid": "${datasource}"}

PANELS = [
    # (section, title, unit, [(expr, legend)])
    ("Traffic", "Request rate by status", "reqps",
     [('sum by (status) (rate(switchyard_requests_total[1m]))', "{{status}}")]),
    ("Traffic", "Error ratio (5xx)", "percentunit",
     [('sum(rate(switchyard_requests_total{status=~"5.."}[5m])) / clamp_min(sum(rate(switchyard_requests_total[5m])), 1e-9)', "5xx share")]),
    ("Traffic", "Time to first token", "s",
     [('histogram_quantile(0.5, sum by (le) (rate(switchyard_time_to_first_token_seconds_bucket[5m])))', "p50"),
      ('histogram_quantile(0.95, sum by (le) (rate(switchyard_time_to_first_token_seconds_bucket[5m])))', "p95")]),
    ("Traffic", "End-to-end latency", "s",
     [('histogram_quantile(0.95, sum by (le, route) (rate(switchyard_request_duration_seconds_bucket[5m])))', "p95 {{route}}")]),
    ("Traffic", "In flight", "short",
     [('sum by (instance) (switchyard_in_flight_requests)', "{{instance}}")]),
    ("Traffic", "Upstream errors by kind", "ops",
     [('sum by (kind) (rate(switchyard_upstream_errors_total[5m]))', "{{kind}}")]),
    ("Workers", "Worker TTFT p90 (observed)", "s",
     [('max by (worker) (switchyard_worker_ttft_p90_seconds)', "{{worker}}")]),
    ("Workers", "Worker TPOT p90 (observed)", "s",
     [('max by (worker) (switchyard_worker_tpot_p90_seconds)', "{{worker}}")]),
    ("Workers", "Worker state", "short",
     [('max by (worker, state) (switchyard_worker_state) == 1', "{{worker}} {{state}}")]),
    ("Workers", "Circuit breakers open", "short",
     [('sum by (worker) (switchyard_worker_breaker_state{state="open"})', "{{worker}}"),
      ('sum(rate(switchyard_breaker_rejections_total[5m]))', "rejections/s")]),
    ("Workers", "In flight per worker", "short",
     [('sum by (worker) (switchyard_worker_in_flight_requests)', "{{worker}}")]),
    ("Routing", "Prefix cache hit rates", "percentunit",
     [('sum by (kind) (rate(switchyard_prefix_cache_hits_total[5m])) / ignoring(kind) group_left sum(rate(switchyard_routing_decisions_total[5m]))', "{{kind}}")]),
    ("Routing", "Routing decisions by branch", "ops",
     [('sum by (branch) (rate(switchyard_routing_decisions_total[5m]))', "{{branch}}")]),
    ("Routing", "Prompt-group re-plan churn (share of traffic moved)", "percentunit",
     [('max by (instance) (switchyard_routing_plan_moved_ratio)', "last re-plan {{instance}}"),
      ('max by (instance) (switchyard_routing_plan_moved_beyond_membership_change_ratio)', "beyond last join/leave {{instance}}")]),
    ("Admission", "Admission queue depth", "short",
     [('sum by (class) (switchyard_admission_queue_depth)', "{{class}}")]),
    ("Admission", "Refusals by reason", "ops",
     [('sum by (gate, code) (rate(switchyard_admission_refusals_total[5m]))', "{{gate}} {{code}}"),
      ('sum(rate(switchyard_shutdown_refused_total[5m]))', "shutting_down")]),
    ("Admission", "Queue wait p95", "s",
     [('histogram_quantile(0.95, sum by (le) (rate(switchyard_admission_queue_wait_seconds_bucket[5m])))', "p95")]),
    ("Ledger", "Raft leader", "short",
     [('max by (instance) (switchyard_ledger_raft_role{role="leader"})', "{{instance}}"),
      ('max(switchyard_ledger_raft_term)', "term")]),
    ("Ledger", "Commit latency (ledger writes)", "s",
     [('histogram_quantile(0.95, sum by (le) (rate(switchyard_ledger_commit_seconds_bucket[5m])))', "commit p95"),
      ('histogram_quantile(0.99, sum by (le) (rate(switchyard_ledger_apply_seconds_bucket[5m])))', "apply p99")]),
    ("Ledger", "Commit and apply rate", "short",
     [('max(deriv(switchyard_ledger_raft_commit_index[1m]))', "commits/s"),
      ('max by (instance) (deriv(switchyard_ledger_raft_applied_index[1m]))', "applied/s {{instance}}")]),
    ("Ledger", "Lease remaining tokens", "short",
     [('sum by (instance, pool) (switchyard_ledger_lease_remaining_tokens)', "{{instance}} {{pool}}")]),
    ("Ledger", "Lease requests by outcome", "ops",
     [('sum by (outcome) (rate(switchyard_ledger_lease_requests_total[5m]))', "{{outcome}}")]),
    ("Ledger", "Budget utilisation (water level)", "percentunit",
     [('max(switchyard_degradation_water_level)', "water level"),
      ('max(switchyard_degradation_level)', "degradation level")]),
    ("Lifecycle", "Draining replicas and leader hand-overs", "short",
     [('sum(switchyard_draining)', "draining"),
      ('sum by (outcome) (increase(switchyard_leader_handovers_total[1h]))', "handover {{outcome}}")]),
]


def panel(pid, x, y, title, unit, targets):
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "datasource": DS,
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def build():
    panels, y, pid, section, col = [], 0, 1, None, 0
    for sec, title, unit, targets in PANELS:
        if sec != section:
            if col:
                y += 8
            panels.append({"id": pid, "type": "row", "title": sec, "collapsed": False,
                           "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
            pid, y, col, section = pid + 1, y + 1, 0, sec
        panels.append(panel(pid, col * 8, y, title, unit, targets))
        pid += 1
        col += 1
        if col == 3:
            col, y = 0, y + 8
    return {
        "title": "Switchyard",
        "uid": "switchyard-overview",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "tags": ["switchyard"],
        "templating": {"list": [{
            "name": "datasource", "type": "datasource", "query": "prometheus",
            "label": "Prometheus", "current": {}, "hide": 0,
        }]},
        "panels": panels,
    }


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "switchyard-dashboard.json")
    with open(out, "w") as f:
        json.dump(build(), f, indent=2)
        f.write("\n")
