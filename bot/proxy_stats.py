"""`teaparty proxy stats`: how the human proxy has done per project, decider and kind."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from orchestrator.api import ProxyStats, proxy_stats_at

COLUMNS = ("project", "decider", "kind", "gates", "decisions", "agreements", "agreement")
MORE = ("alone", "overrides", "autonomy")


def proxy_stats_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Print the proxy's figures from the state directory, as a table or (--json) JSON."""
    home = Path(args.home or environ.get("TEAPARTY_HOME") or Path.home() / ".teaparty")
    found = asyncio.run(proxy_stats_at(home.expanduser().resolve()))
    if args.json:
        print(json.dumps([row.as_json() for row in found], indent=2))
    elif not found:
        print(f"no gate has been put to the proxy in {home}")
    else:
        print(table(found))
    return 0


def table(found: list[ProxyStats]) -> str:
    """The figures as aligned columns, one group a line, autonomy last with its reason."""
    rows = [[*COLUMNS, *MORE]]
    for row in found:
        autonomy = "yes" if row.autonomy else f"no: {row.why_not}"
        rows.append(
            [
                *(row.project, row.decider, row.kind, str(row.gates), str(row.decisions)),
                *(str(row.agreements), f"{row.agreement:.2f}", str(row.alone)),
                *(str(row.overrides), autonomy),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(r, widths, strict=False)), r[-1]])
        for r in rows
    )
