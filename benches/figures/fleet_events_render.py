#!/usr/bin/env python3
"""fleet_events.sh's trace summary and page.

  fleet_events_render.py analyse TRACE EVENTS_TSV REPORT_JSON OUT_JSON
      From the load tool's trace (one line per request: sent_ms, target, messages, answer,
      worker), the event's times (unix ms, set against the report's started_unix_ms) and the
      report: conversations in progress at the event and the share that moved.
  fleet_events_render.py render META_TSV OUT_MD
  fleet_events_render.py pool MOVES_JSON...
      Every leave run's figures pooled by shape (across pages and seeds), and per run the
      system prompts whose conversations moved beyond the departed worker's: which prompts'
      workers a re-plan shifted.

A conversation is named by its opening (system message + first user message): no session key
is sent. In progress at the event = it has an answered turn sent before the event started (its
worker was chosen before the event; that turn may still have been streaming) and an answered
turn sent after the event ended. Moved = the first such turn after went to another worker than
the last one before. Turns sent while the event was under way (for a restart: from the kill
until the restarted replica lists its workers routable again) are in neither. The same measure
taken CONTROL_BEFORE_MS earlier, over a window as long as the event's, with nothing happening,
is the churn the run has anyway.
"""

import hashlib
import json
import sys
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).parent))
from figlib import load_report, one, read_meta, table  # noqa: E402
from figrender_common import dedup_commands, header, relative  # noqa: E402

CONTROL_BEFORE_MS = 12_000
HIT_WINDOW_MS = 15_000
WORKERS = 4
GOAL = 1.2 / WORKERS


def opening(request):
    messages = request["messages"]
    system = messages[0]["content"] if messages else ""
    first_user = messages[1]["content"] if len(messages) > 1 else ""
    return system, first_user


def answered(request):
    return request.get("answer") is not None and request.get("worker")


def moves(conversations, start, end):
    """Conversations in progress across [start, end) and where their next turn went."""
    rows = []
    for number, turns in enumerate(conversations):
        before = [t for t in turns if t["sent_ms"] < start and answered(t)]
        after = [t for t in turns if t["sent_ms"] >= end and answered(t)]
        if not before or not after:
            continue
        last, nxt = before[-1], after[0]
        rows.append({
            "conversation": number,
            # Which system prompt (conversations are grouped by it): a short digest.
            "prompt": hashlib.sha1(turns[0]["messages"][0]["content"].encode()).hexdigest()[:8],
            "home": last["worker"],
            "home_turn_streaming_at_event": last["sent_ms"] + (last.get("e2e_ms") or 0) > start,
            "next": nxt["worker"],
            "next_target": nxt["target"],
            "turns_during_event": sum(1 for t in turns if start <= t["sent_ms"] < end),
            "moved": nxt["worker"] != last["worker"],
            # Every answered turn after the event: [replica, worker], to see a move followed
            # (or a conversation split between workers).
            "after": [[t["target"], t["worker"]] for t in after],
        })
    return rows


def hit_rate(requests, start, end):
    prompt = sum(r.get("prompt_tokens") or 0 for r in requests if start <= r["sent_ms"] < end)
    cached = sum(r.get("cached_tokens") or 0 for r in requests if start <= r["sent_ms"] < end)
    return cached / prompt if prompt else None


def share(part, whole):
    return part / whole if whole else None


def analyse(trace_path, events_path, report_path, out_path):
    report = load_report(report_path)
    events = {}
    for line in Path(events_path).read_text().splitlines():
        key, _, value = line.partition("\t")
        events[key] = value
    started = report["started_unix_ms"]
    start = int(events["start_unix_ms"]) - started
    end = int(events["end_unix_ms"]) - started
    requests = []
    with open(trace_path) as trace:
        for line in trace:
            if line.strip():
                requests.append(json.loads(line))
    requests.sort(key=lambda r: r["index"])
    by_opening = {}
    for request in requests:
        by_opening.setdefault(opening(request), []).append(request)
    conversations = list(by_opening.values())

    rows = moves(conversations, start, end)
    moved = [r for r in rows if r["moved"]]
    summary = {
        "event_start_ms": start,
        "event_end_ms": end,
        "event_ms": end - start,
        "requests": len(requests),
        "conversations": len(conversations),
        "in_progress": len(rows),
        "moved": len(moved),
        "moved_share": share(len(moved), len(rows)),
        "home_turn_streaming_at_event": sum(r["home_turn_streaming_at_event"] for r in rows),
        "failed": sum(1 for r in requests if r.get("answer") is None),
        "failed_during_event": sum(1 for r in requests if r.get("answer") is None and start <= r["sent_ms"] < end),
        "failed_before_event": sum(1 for r in requests if r.get("answer") is None and r["sent_ms"] < start),
        "failed_after_event": sum(1 for r in requests if r.get("answer") is None and r["sent_ms"] >= end),
        "physical_hit_rate": report.get("physical_hit_rate"),
        "hit_rate_before": hit_rate(requests, start - HIT_WINDOW_MS, start),
        "hit_rate_after": hit_rate(requests, end, end + HIT_WINDOW_MS),
        "admin_status": sorted({v for k, v in events.items() if k.startswith("admin_status_")}),
        "events": events,
    }
    control_start = start - CONTROL_BEFORE_MS
    control = moves(conversations, control_start, control_start + (end - start))
    summary["control_in_progress"] = len(control)
    summary["control_moved"] = sum(r["moved"] for r in control)
    summary["control_moved_share"] = share(summary["control_moved"], len(control))
    if "departed" in events:
        gone = events["departed"]
        lived = [r for r in rows if r["home"] == gone]
        summary["departed"] = gone
        summary["lived_on_departed"] = len(lived)
        summary["moved_from_departed"] = sum(r["moved"] for r in lived)
        summary["moved_beyond_departed"] = len(moved) - summary["moved_from_departed"]
        summary["moved_beyond_departed_share"] = share(summary["moved_beyond_departed"], len(rows))
        summary["sent_to_departed_after"] = sum(
            1 for r in requests if r["sent_ms"] >= end and r.get("worker") == gone)
    if "worker" in events:
        new = events["worker"]
        summary["joined"] = new
        summary["moved_to_joined"] = sum(1 for r in moved if r["next"] == new)
        summary["answered_by_joined_after"] = sum(
            1 for r in requests if r["sent_ms"] >= end and r.get("worker") == new)
        if "routable_unix_ms" in events:
            summary["routable_after_ms"] = int(events["routable_unix_ms"]) - int(events["end_unix_ms"])
    if "replica" in events:
        replica = int(events["replica"])
        killed = int(events["killed_unix_ms"]) - started
        via = [r for r in rows if r["next_target"] == replica]
        summary["replica"] = replica
        summary["via_restarted"] = len(via)
        summary["moved_via_restarted"] = sum(r["moved"] for r in via)
        summary["moved_via_restarted_share"] = share(summary["moved_via_restarted"], len(via))
        others = [r for r in rows if r["next_target"] != replica]
        summary["moved_via_others_share"] = share(sum(r["moved"] for r in others), len(others))
        summary["healthy_after_kill_ms"] = int(events["healthy_unix_ms"]) - int(events["killed_unix_ms"])
        summary["failed_to_restarted_during_event"] = sum(
            1 for r in requests if r.get("answer") is None and r["target"] == replica
            and start <= r["sent_ms"] < end)
        summary["failed_in_flight_at_kill"] = sum(
            1 for r in requests if r.get("answer") is None and r["target"] == replica
            and r["sent_ms"] < killed)
        summary["sent_to_restarted_during_event"] = sum(
            1 for r in requests if r["target"] == replica and start <= r["sent_ms"] < end)
    summary["conversations_in_progress"] = rows
    Path(out_path).write_text(json.dumps(summary, indent=1) + "\n")


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def cases(meta):
    for value in meta.get("case", []):
        seed, event, mode, replicas, report, summary, load, *steal = value.split("\t")
        yield {
            "seed": int(seed), "event": event, "mode": mode, "replicas": int(replicas),
            "report": load_report(report), "summary": load_report(summary), "path": summary,
            "load": load,
            # Recorded since the script waits for a quiet host; older pages have none.
            "steal": steal[0] if steal else "-",
        }


def topology(case):
    return f"{case['replicas']} {case['mode']}"


def after_restart(summary):
    """Later turns of the conversations the restarted replica moved: where each replica sent
    them (None when the summary predates the per-turn record)."""
    rows = summary["conversations_in_progress"]
    if not rows or "after" not in rows[0]:
        return None
    replica = summary["replica"]
    counts = {"it_new": 0, "it_home": 0, "others_home": 0, "others_new": 0, "elsewhere": 0}
    for row in rows:
        if not (row["moved"] and row["next_target"] == replica):
            continue
        for target, worker in row["after"][1:]:
            side = "it" if target == replica else "others"
            where = "new" if worker == row["next"] else "home" if worker == row["home"] else None
            counts[f"{side}_{where}" if where else "elsewhere"] += 1
    return counts


PLAN_MOVED_GAUGE = "switchyard_routing_plan_moved_beyond_membership_change_ratio"


def plan_moved(case):
    """Each replica's own estimate of the share of conversation traffic its re-plan on the
    membership change moved between workers that stayed, from its metrics saved at the end
    of the run. The saved metrics
    leave out gauges at 0, so a replica without the line reads 0 where another has it; no
    line at all (gateways older than the gauge, or nothing moved anywhere) gives no figure."""
    summary = Path(case["path"])
    name = summary.name.removesuffix(".moves.json")
    values = []
    for metrics in sorted(summary.parent.glob(f"{name}.gateway-*.metrics.txt")):
        value = 0.0
        for line in metrics.read_text().splitlines():
            if line.startswith(PLAN_MOVED_GAUGE + " "):
                value = float(line.split()[1])
        values.append(value)
    return values if any(values) else []


def plan_moved_text(case):
    values = plan_moved(case)
    if not values:
        return ""
    return "; its re-plan moved between the others (each replica's gauge) " + ", ".join(fmt(v) for v in values)


def event_detail(case):
    s = case["summary"]
    if case["event"] == "leave":
        return (f"{s['moved_from_departed']} of {s['lived_on_departed']} on {s['departed']} moved; "
                f"beyond them {fmt(s['moved_beyond_departed_share'])}; "
                f"{s['sent_to_departed_after']} answered by {s['departed']} after"
                + plan_moved_text(case))
    if case["event"] == "join":
        return (f"{s['moved_to_joined']} of the moved to {s['joined']}; "
                f"{s['answered_by_joined_after']} answered by it after" + plan_moved_text(case))
    text = (f"replica {s['replica']}: back healthy {s['healthy_after_kill_ms']} ms after the kill; "
            f"next turn via it {s['moved_via_restarted']}/{s['via_restarted']} moved "
            f"({fmt(s['moved_via_restarted_share'])}), via the others "
            f"{fmt(s['moved_via_others_share'])}")
    split = after_restart(s)
    if split is not None:
        text += (f"; later turns of those it moved: via it {split['it_new']} on the new worker, "
                 f"{split['it_home']} on the old; via the others {split['others_home']} on the old, "
                 f"{split['others_new']} on the new, {split['elsewhere']} elsewhere")
    return text


def failed_detail(case):
    s = case["summary"]
    text = f"{s['failed']}/{s['requests']}"
    if case["event"] == "restart":
        text += (f" ({s['failed_in_flight_at_kill']} in flight on it at the kill, "
                 f"{s['failed_to_restarted_during_event']} of {s['sent_to_restarted_during_event']} "
                 f"sent to it from the kill until it listed its workers routable)")
    elif s["failed"]:
        text += f" ({s['failed_before_event']}/{s['failed_during_event']}/{s['failed_after_event']} before/during/after)"
    return text


def disturbed(case):
    """A run already churning before the event (the control over the goal) or failing
    requests before it: its moved share says more about the run than about the event."""
    s = case["summary"]
    control = s["control_moved_share"]
    # The requests a killed replica was serving fail because of the event, not before it.
    failed_before = s["failed_before_event"] - s.get("failed_in_flight_at_kill", 0)
    return (control is not None and control > GOAL) or failed_before > 0


def goal_text(case):
    s = case["summary"]
    if s["moved_share"] is None:
        return "-"
    if case["event"] == "leave":
        total = "met" if s["moved_share"] <= GOAL else "over"
        beyond = s["moved_beyond_departed_share"]
        text = f"total {total}; beyond {'met' if beyond is not None and beyond <= GOAL else 'over'}"
    else:
        text = "met" if s["moved_share"] <= GOAL else "over"
    return text + (" (disturbed run)" if disturbed(case) else "")


def render(meta, notes=None):
    all_cases = list(cases(meta))
    rows = []
    for case in all_cases:
        s = case["summary"]
        rows.append([
            case["seed"], case["event"], topology(case), s["in_progress"],
            f"{s['moved']} = {fmt(s['moved_share'])}", goal_text(case), event_detail(case),
            f"{s['control_moved']}/{s['control_in_progress']} = {fmt(s['control_moved_share'])}",
            s["event_ms"], failed_detail(case), fmt(s["physical_hit_rate"]),
            f"{fmt(s['hit_rate_before'])} → {fmt(s['hit_rate_after'])}",
            ",".join(s["admin_status"]) or "-", case["load"], case["steal"], relative(case["path"]),
        ])
    grid, order = {}, []
    for case in all_cases:
        key = (case["event"], topology(case))
        if key not in grid:
            order.append(key)
        grid.setdefault(key, []).append(case)

    def spread(values):
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        if len(values) == 1:
            return fmt(values[0])
        return f"{fmt(min(values))}–{fmt(max(values))}"

    summary = []
    for key in order:
        group = grid[key]
        ss = [c["summary"] for c in group]
        beyond = spread([s.get("moved_beyond_departed_share") for s in ss]) if key[0] == "leave" else "-"
        # One run's share swings with how many conversations a worker happens to hold (about
        # 75 in progress over 4 workers: ±0.05 by chance), so the seeds are also pooled.
        in_progress = sum(s["in_progress"] for s in ss)
        pooled = share(sum(s["moved"] for s in ss), in_progress) if in_progress else None
        departed = "-"
        if key[0] == "leave":
            departed = spread([share(s.get("lived_on_departed") or 0, s["in_progress"])
                               for s in ss if s["in_progress"]])
        via = spread([s.get("moved_via_restarted_share") for s in ss]) if key[0] == "restart" else "-"
        summary.append([
            key[0], key[1], ", ".join(str(c["seed"]) for c in group),
            spread([s["in_progress"] for s in ss]).replace(".000", ""),
            spread([s["moved_share"] for s in ss]), fmt(pooled), departed, beyond, via,
            spread([s["control_moved_share"] for s in ss]),
            sum(1 for c in group if goal_text(c).split(" (")[0] in ("met", "total met; beyond met")),
            sum(1 for c in group if disturbed(c)),
        ])
    sizing = []
    for value in meta.get("sizing", []):
        seed, kv, path = value.split("\t")
        report = load_report(path)
        sizing.append([seed, kv, report["working_set_blocks"],
                       fmt(report["working_set_blocks"] / (4 * int(kv)), 2), report["conversations"]])
    parts = [
        header(
            "Moved share on worker join / leave and replica restart, live processes",
            meta,
            f"4 simulated workers (KV sized so the working set is {one(meta, 'kv_share')} of the "
            f"fleet's), cache_aware, `agentic` workload (no session key, no `user`) at "
            f"{one(meta, 'rate')} req/s for {one(meta, 'duration')} s, spread at random over the "
            f"replicas; the event begins {one(meta, 'event_at')} s into the run. join = a 5th sim "
            "(same KV) started and `POST /admin/workers` on every replica; leave = `DELETE "
            "/admin/workers/sim-3` on every replica (drain); restart = the last replica (a "
            "follower in a Raft group) killed with SIGKILL and started again with the same flags "
            "and data dir, the load tool still sending it its share meanwhile.\n\n"
            "From each run's trace: a conversation (system message + first user message) is *in "
            "progress* when it has an answered turn sent before the event began and one sent after "
            "it ended (for restart: after the restarted replica listed its 4 workers routable "
            "again); *moved* = its first turn after went to another worker than its last turn "
            "before. For leave, the moved that lived on the departed worker had to move; "
            "*beyond* = the others that moved, over all in progress. *control* = the same measure "
            f"{CONTROL_BEFORE_MS // 1000} s before the event over a window as long as the event's, "
            "with nothing happening (the churn the run has anyway); a run is *disturbed* when "
            "that control is over the goal or requests failed before the event, beyond those a killed replica was serving (its moved share "
            "then says more about the run than about the event). Goal (issue 12): ≤ 1.2/N = "
            f"{GOAL:.2f} with N = {WORKERS}. A failed turn ends its conversation in the load tool, "
            "so conversations whose turn failed during a restart are not in progress after it.",
        ),
        "## Summary (range over seeds)",
        "",
        table(["event", "replicas", "seeds", "in progress", "moved share", "pooled over the seeds",
               "the departed held", "beyond the departed's",
               "moved via the restarted replica", "control (no event)", "runs meeting ≤ 0.30", "disturbed runs"],
              summary),
        "",
        "## Every run",
        "",
        table(["seed", "event", "replicas", "in progress", "moved", "goal ≤ 0.30", "detail",
               "control moved", "event ms", "failed/sent", "hit rate (run)",
               f"hit rate {HIT_WINDOW_MS // 1000} s before → after", "admin status",
               "load avg at end", "steal %", "summary"], rows),
        "",
        "## KV sizing (per seed)",
        "",
        table(["seed", "kv blocks / sim", "working set (blocks)", "working set / fleet KV",
               "conversations"], sizing),
        "",
        "## Commands",
        "",
        dedup_commands(meta),
        "",
    ]
    if notes is not None and notes.exists():
        parts[-4:-4] = ["## Notes (written after the run, from the summaries above)", "",
                        notes.read_text().strip(), ""]
    return "\n".join(parts)


def pool(paths):
    """Leave runs pooled by shape; the moves beyond the departed's by system prompt."""
    shapes = {}
    print("| run | in progress | moved | the departed held | beyond: conversations by system prompt (home → next) |")
    print("|---|---|---|---|---|")
    for path in paths:
        run = json.loads(Path(path).read_text())
        if "departed" not in run:
            continue
        gone = run["departed"]
        beyond = {}
        for row in run["conversations_in_progress"]:
            if row["moved"] and row["home"] != gone:
                key = f'{row["prompt"]} {row["home"]} → {row["next"]}'
                beyond[key] = beyond.get(key, 0) + 1
        name = Path(path).parent.name + "/" + Path(path).name.removesuffix(".moves.json")
        detail = ", ".join(f"{key}: {n}" for key, n in sorted(beyond.items())) or "none"
        print(f'| {name} | {run["in_progress"]} | {run["moved"]} | {run["lived_on_departed"]} | {detail} |')
        shape = "_".join(Path(path).name.split(".")[0].split("_")[2:])
        total = shapes.setdefault(shape, [0, 0, 0, 0, 0])
        total[0] += 1
        total[1] += run["in_progress"]
        total[2] += run["moved"]
        total[3] += run["lived_on_departed"]
        total[4] += int(run["moved_share"] is not None and run["moved_share"] <= GOAL)
    print()
    print(f"| shape | runs | in progress | moved share | the departed held | beyond | runs ≤ {GOAL:.2f} |")
    print("|---|---|---|---|---|---|---|")
    for shape, (runs, in_progress, moved, held, met) in sorted(shapes.items()):
        print(f"| {shape} | {runs} | {in_progress} | {moved / in_progress:.3f} | "
              f"{held / in_progress:.3f} | {(moved - held) / in_progress:.3f} | {met} |")


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "pool":
        pool(sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "analyse":
        analyse(*sys.argv[2:6])
    elif len(sys.argv) == 4 and sys.argv[1] == "render":
        out = Path(sys.argv[3])
        # Hand-written reading of the run, kept beside the page when there is one.
        notes = out.with_name(out.stem + "_notes.md")
        out.write_text(render(read_meta(sys.argv[2]), notes))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
