"""The README says what CI runs: the benchmarks it names are those `.ci/check` runs, each a
file that exists; its demo paragraph says what the demo decider really replies."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_benches() -> list[str]:
    text = (ROOT / "README.md").read_text()
    paragraph = text.split("Benchmarks (each", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"`bench/(\w+)\.py`", paragraph)


def checked_benches() -> list[str]:
    script = (ROOT / ".ci" / "check").read_text()
    loop = re.search(r"^for bench in ([\w ]+); do$", script, flags=re.M)
    assert loop, ".ci/check no longer runs the benches in one loop: read them another way"
    return loop.group(1).split()


def test_the_readme_names_every_bench_ci_runs_and_no_other() -> None:
    named, run = readme_benches(), checked_benches()
    assert len(named) == len(set(named)), f"named twice: {named}"
    assert sorted(named) == sorted(run)
    for bench in run:
        assert (ROOT / "bench" / f"{bench}.py").is_file(), f"bench/{bench}.py is missing"


def test_the_readme_says_what_the_demo_decider_replies() -> None:
    """What the demo prints it replies is checked by tests/test_demo.py, which runs it."""
    demo_test = (ROOT / "tests" / "test_demo.py").read_text()
    assert r"\(the demo decider\) replied: /approve [0-9a-f]{7}" in demo_test
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "the demo decider replies `/approve <hash>`" in readme
    assert "the demo decider replies `yes`" not in readme
