#!/usr/bin/env python3
"""Markdown page of hotspot.sh: per run, consistent_hash's per-worker load variance on
`hotkey` with spreading off and on, and the cut. Usage: hotspot_render.py META_TSV OUT_MD."""

import sys

sys.dont_write_bytecode = True
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from figlib import goal, load_report, one, pct, read_meta, table  # noqa: E402
from figrender_common import config_blocks, dedup_commands, header, relative, routing_branches  # noqa: E402

GOAL_CUT = 0.60


def cases(meta):
    for value in meta.get("case", []):
        run, seed, hotspot, load_factor, path = value.split("\t")
        yield int(run), int(seed), hotspot == "true", float(load_factor), load_report(path), path


def variance(report):
    cv = report["worker_load_cv"]
    return cv * cv


def render(meta):
    pairs = {}
    for run, seed, hotspot, load_factor, report, path in cases(meta):
        pairs.setdefault((load_factor, run, seed), {})[hotspot] = (report, path)
    rows, cuts, branch_rows = [], {}, []
    for (load_factor, run, seed), pair in sorted(pairs.items()):
        if False not in pair or True not in pair:
            continue
        (off, off_path), (on, on_path) = pair[False], pair[True]
        cut = 1 - variance(on) / variance(off) if variance(off) > 0 else 0.0
        cuts.setdefault(load_factor, []).append(cut)
        workers = lambda r: ", ".join(str(w["requests"]) for _, w in sorted(r["workers"].items()))
        rows.append([
            f"{load_factor:g}", run, seed, f"{variance(off):.4f}", f"{variance(on):.4f}",
            f"**−{cut * 100:.0f} %**" if cut >= 0 else f"+{-cut * 100:.0f} %",
            workers(off), workers(on), pct(off["physical_hit_rate"]), pct(on["physical_hit_rate"]),
            f"[off]({relative(off_path)}) [on]({relative(on_path)})",
        ])
        for label, path in (("off", off_path), ("on", on_path)):
            branches = routing_branches(path.replace(".json", ".metrics.txt"))
            branch_rows.append([f"{load_factor:g}", run, label,
                                ", ".join(f"{b} {n}" for b, n in sorted(branches.items())) or "-"])
    out = [header(
        "Hotspot spreading: consistent_hash load variance on `hotkey`, repeated long runs",
        meta,
        f"4 simulated workers (defaults), one gateway, `consistent_hash`, open-loop `hotkey` "
        f"load (3 hot sessions carry 80 % of the requests) at {one(meta, 'rate')} req/s for "
        f"{one(meta, 'duration')} s per case; run n uses seed 6 + n. Each case starts cold. "
        f"Gateway config = shipped defaults (spread_width 4, hot-key overflow to the least "
        f"loaded of the spread set) except `routing.hotspot.enabled`, "
        f"`routing.hotspot.slice_ms = {one(meta, 'slice_ms')}` (45 slices per run instead of 3) "
        "and, in the last pair, bounded load switched off (`load_factor = 100`).",
    )]
    out += ["## Commands", "", dedup_commands(meta), "", "## Results", "",
            "Variance = CV² of the per-worker request counts over the whole run (CV = "
            "population stddev / mean). Cut = 1 − variance(on) / variance(off) for the same "
            "seed.", "",
            table(["load_factor", "run", "seed", "variance off", "variance on", "cut",
                   "requests per worker, off", "requests per worker, on", "hit rate off",
                   "hit rate on", "raw"], rows), "",
            "Routing decisions by branch (`switchyard_routing_decisions_total`):", "",
            table(["load_factor", "run", "spreading", "branches"], branch_rows), "",
            "Gateway configs:", "", config_blocks(meta), "", "## Goal (issue 4)", ""]
    for load_factor, values in sorted(cuts.items()):
        listed = ", ".join(f"−{v * 100:.0f} %" if v >= 0 else f"+{-v * 100:.0f} %" for v in values)
        ok = all(v >= GOAL_CUT for v in values)
        out.append(f"- load_factor {load_factor:g}: variance cut per run {listed} (goal ≥ 60 % "
                   f"in every run: {goal(ok)}).")
    out += ["", "## Reading", "",
            "- Why four 30 s runs of the earlier code gave −20 … −78 %: a hot key rotated over "
            "3 of the 4 workers (spread_width 3), so each hot key's set left one worker out, and "
            "which one is fixed by where the key and the workers sit on the ring. With 3 hot "
            "sessions that is a skew built into the geometry, not noise: longer runs do not "
            "average it away. On top, when the slice's worker was above the load bound the "
            "request walked clockwise to whichever worker's vnode came next, not to the least "
            "loaded one, and a 30 s run holds 15 slices, so a key's last rotation was cut short "
            "at a different point in every run. The baseline (spreading off) is already evened "
            "out by bounded load (variance ≈ 0.015), so a small skew left by spreading swung "
            "the ratio a lot.",
            "- Now: the spread set covers the fleet (spread_width 4 ≥ 4 workers), so over whole "
            "rotations every worker carries the same share of every hot key, and a hot request "
            "over the bound goes to the least loaded member of its set. Each slice still pins "
            "a hot key to one worker (cache locality): the hit rate is the same with spreading "
            "on and off.",
            "- Variance is computed over the whole run from request counts; with 45 slices per "
            "run a hot key completes about 11 rotations, so the partial last rotation weighs "
            "little. The bounded-load-off pair shows spreading alone (no overflow help)."]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    meta = read_meta(sys.argv[1])
    Path(sys.argv[2]).write_text(render(meta))
