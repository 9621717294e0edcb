"""`teaparty` with every model call taking SECONDS: `python slow_run.py SECONDS ARGS...`.

The scripted model answers at once, so a run is over before a person (or a test) can watch
it; this launcher slows each call inside the process under test and nowhere else.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import bot.local_run as local_run
from bot.cli import entry

SECONDS = float(sys.argv.pop(1))
_models = local_run.models


class Slow:
    def __init__(self, model: Any) -> None:
        self.model = model

    async def complete(self, request: Any) -> Any:
        await asyncio.sleep(SECONDS)
        return await self.model.complete(request)


def slowed(*args: Any, **kwargs: Any) -> Callable[[Any], Slow]:
    made = _models(*args, **kwargs)
    return lambda agent: Slow(made(agent))


local_run.models = slowed
entry()
