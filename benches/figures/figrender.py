#!/usr/bin/env python3
"""Markdown pages for the figures: one renderer per script, fed the facts it recorded.

    figrender.py NAME META_TSV OUT_MD
        Reads the facts a script recorded (tab-separated `key<TAB>value` lines) and writes
        the figure's markdown page.

The renderers live by figure family (figrender_routing, figrender_failover, figrender_storm)
on shared helpers (figrender_common)."""

import sys
from pathlib import Path

from figlib import read_meta
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


def main(argv):
    if len(argv) != 3 or argv[0] not in RENDERERS:
        print(f"usage: figrender.py {{{'|'.join(RENDERERS)}}} META_TSV OUT_MD", file=sys.stderr)
        return 2
    name, meta, out = argv
    Path(out).write_text(RENDERERS[name](read_meta(meta)))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
