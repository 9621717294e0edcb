"""The bus is a mechanism: its tests run with nothing above it imported, no feature (teams,
jobs, proxy) and no edge. They run here in a pytest of their own without the suite's
conftest (whose plugins bring the edge), and that process's modules are checked after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABOVE = ("orchestrator.teams", "orchestrator.jobs", "orchestrator.proxy", "orchestrator.api")
CHECK = f"""
import sys, pytest
code = pytest.main(["--noconftest", "-p", "no:cacheprovider", "-q",
                    "tests/test_bus.py", "tests/test_routing.py"])
above = sorted(m for m in sys.modules if m.startswith({ABOVE!r}) or m.split(".")[0] == "bot")
print("ABOVE:", above)
sys.exit(code or (3 if above else 0))
"""


def test_the_bus_tests_run_with_nothing_above_the_bus() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "ABOVE: []" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
