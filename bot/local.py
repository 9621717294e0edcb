"""`teaparty run`: a local job from the terminal, with gates asked on the terminal."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping
from pathlib import Path

from orchestrator.api import Gate, ModelKind, OrchestratorError, run_local, shipped_org_dir

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def run_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the job the arguments describe; print its progress and outcome."""
    repo: Path = args.repo
    if not (repo / ".git").exists():
        print(f"teaparty run: {repo} is not a git repository", file=sys.stderr)
        return EXIT_USAGE
    body = args.body_file.read_text() if args.body_file else args.title
    model: ModelKind = args.model or ("anthropic" if env.get("ANTHROPIC_API_KEY") else "scripted")
    if model == "scripted":
        print("no ANTHROPIC_API_KEY: using the scripted stand-in for the model")
    home = args.home or Path(env.get("TEAPARTY_HOME") or Path.home() / ".teaparty")
    org_dir = Path(env["TEAPARTY_CONFIG"]) if env.get("TEAPARTY_CONFIG") else shipped_org_dir()

    async def approve(gate: Gate) -> str:
        if args.yes:
            return "yes"
        options = f" [{'/'.join(gate.options)}]" if gate.options else ""
        return await asyncio.to_thread(input, f"your answer{options}: ")

    try:
        job = asyncio.run(
            run_local(
                repo,
                title=args.title,
                body=body,
                home=home,
                org_dir=org_dir,
                model=model,
                env=env,
                approve=approve,
                say=print,
            )
        )
    except (OrchestratorError, RuntimeError, EOFError) as exc:
        print(f"teaparty run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"result: {job.result}")
    print(f"branch {job.branch}:")
    for commit in job.commits:
        print(f"  {commit}")
    tokens = job.usage.input_tokens + job.usage.output_tokens
    print(
        f"tokens: {tokens:,} (cache read {job.usage.cache_read_tokens:,}); "
        f"cost: ${job.cost_usd:.4f}"
    )
    return EXIT_OK
