#!/usr/bin/env python3
"""Joins fleet_affinity.sh pages run one seed at a time (FIG_SUFFIX=_NAME_s1, _NAME_s2, …)
into one page over every seed, so pooled figures and the spread cover the whole sitting.

Each part's data dir (benches/figures/data/fleet_affinity<SUFFIX>) moves into the merged one
with its meta paths rewritten; the parts' own pages are removed. The merged meta keeps the
first part's header lines, every part's commands, sizings and cases, and the seeds of all.

Usage: fleet_affinity_merge.py OUT_SUFFIX PART_SUFFIX [PART_SUFFIX ...]
e.g.   fleet_affinity_merge.py _s29u _s29ab_u_s1 _s29ab_u_s2 …"""

import shutil
import subprocess
import sys
from pathlib import Path

FIGURES = Path(__file__).resolve().parent
DATA = FIGURES / "data"
# Lines every part writes once; the merged page keeps the first part's, but seeds join.
HEADER_KEYS = ("started", "host", "loadavg_start", "git", "rate", "duration", "kv_share",
               "scrape_ms", "busy_depth", "loose_spill_factor")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_suffix, parts = argv[1], argv[2:]
    out_dir = DATA / f"fleet_affinity{out_suffix}"
    if out_dir.exists():
        sys.exit(f"{out_dir} exists: pick another OUT_SUFFIX")
    out_dir.mkdir(parents=True)
    header, body, seeds, tail = {}, [], [], []
    for part in parts:
        part_dir = DATA / f"fleet_affinity{part}"
        meta = part_dir / "meta.tsv"
        if not meta.exists():
            sys.exit(f"{meta} is missing")
        text = meta.read_text().replace(str(part_dir), str(out_dir))
        text = text.replace(f"benches/figures/data/fleet_affinity{part}/",
                            f"benches/figures/data/fleet_affinity{out_suffix}/")
        for line in text.splitlines():
            key, _, value = line.partition("\t")
            if key == "seeds":
                seeds.extend(value.split())
            elif key in HEADER_KEYS:
                header.setdefault(key, value)
            elif key in ("finished", "loadavg_end"):
                tail.append((key, value))
            else:
                body.append(line)
        for path in part_dir.iterdir():
            if path.name != "meta.tsv":
                shutil.move(str(path), out_dir / path.name)
        meta.unlink()
        part_dir.rmdir()
        page = FIGURES / f"fleet_affinity{part}.md"
        if page.exists():
            page.unlink()
    lines = [f"{key}\t{value}" for key, value in header.items()]
    lines.append("seeds\t" + " ".join(seeds))
    lines += body
    # The sitting ends when its last part did.
    for key in ("finished", "loadavg_end"):
        last = [value for k, value in tail if k == key]
        if last:
            lines.append(f"{key}\t{last[-1]}")
    merged_meta = out_dir / "meta.tsv"
    merged_meta.write_text("\n".join(lines) + "\n")
    page = FIGURES / f"fleet_affinity{out_suffix}.md"
    subprocess.run([sys.executable, str(FIGURES / "fleet_affinity_render.py"), str(merged_meta),
                    str(page)], check=True)
    print(page)


if __name__ == "__main__":
    main(sys.argv)
