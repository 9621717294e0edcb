"""What the local GitHub stand-in records of each request, and the faults a test injects."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.fakehub.auth import AuthKind


@dataclass(frozen=True)
class RecordedRequest:
    """One request the hub answered (GraphQL calls as `graphql/<operation name>`)."""

    method: str
    path: str
    query: Mapping[str, str]
    status: int
    operation_id: str | None
    auth: AuthKind
    body: Any = None


@dataclass
class Fault:
    """An answer to give the next `remaining` requests matching `method` and `pattern`."""

    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    remaining: int
    apply: bool = False


class Faults:
    """The injected faults, taken in the order they were added."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        """Queue a fault."""
        with self._lock:
            self._faults.append(fault)

    def take(self, method: str, path: str) -> Fault | None:
        """The first fault with answers left that matches this request, using one of them."""
        with self._lock:
            for fault in self._faults:
                if fault.remaining and fault.method in (method, "*") and fault.pattern.search(path):
                    fault.remaining -= 1
                    return fault
            return None


def decoded(raw: bytes) -> Any:
    """A request body as JSON, or as text when it is not JSON (None when empty)."""
    try:
        return json.loads(raw) if raw.strip() else None
    except ValueError:
        return raw.decode(errors="replace")
