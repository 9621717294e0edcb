"""Model prices (USD per million tokens) from the organisation's models.yaml, and what a
call cost."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.load import config_error, read_yaml, shipped_org_dir, validate
from orchestrator.core.errors import ConfigError, ConfigIssue
from orchestrator.core.messages import Usage

PRICES_FILE = "models.yaml"
TOKENS_PER_PRICE_UNIT = 1_000_000
_DATE_SUFFIX = re.compile(r"-\d{8}$")


class ModelPrice(BaseModel):
    """One model's list prices in USD per million tokens, and the smallest prefix (tokens)
    its prompt cache keeps: a shorter one is billed as input each time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    min_cache: int = Field(default=1024, ge=0)

    def cost_usd(self, usage: Usage) -> float:
        """What `usage` costs at these prices."""
        micro_dollars = (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        )
        return micro_dollars / TOKENS_PER_PRICE_UNIT


class PriceTable(BaseModel):
    """Prices keyed by model id, as written in models.yaml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelPrice]

    def price(self, model: str) -> ModelPrice:
        """The prices of `model`; a dated id (claude-haiku-4-5-20251001) falls back to its alias."""
        found = self.models.get(model) or self.models.get(_DATE_SUFFIX.sub("", model))
        if found is None:
            known = ", ".join(sorted(self.models)) or "(none)"
            message = f"no price for model {model!r}; add it (known models: {known})"
            raise ConfigError((ConfigIssue(PRICES_FILE, None, "models", message),))
        return found

    def cost_usd(self, model: str, usage: Usage) -> float:
        """What `usage` of `model` costs in USD."""
        return self.price(model).cost_usd(usage)


def load_prices(path: Path) -> PriceTable:
    """Read and validate a price table; problems are a ConfigError naming file and line."""
    doc = read_yaml(path)
    table, issues = validate(PriceTable, doc.data, doc)
    if table is None:
        raise config_error(issues)
    return table


@functools.cache
def shipped_prices() -> PriceTable:
    """The price table shipped with teaparty (config/models.yaml), read once."""
    return load_prices(shipped_org_dir() / PRICES_FILE)


def org_prices(directory: Path) -> PriceTable:
    """The organisation's prices: its models.yaml, else the shipped table."""
    path = directory / PRICES_FILE
    return load_prices(path) if path.is_file() else shipped_prices()


def cost_usd(model: str, usage: Usage, *, prices: PriceTable | None = None) -> float:
    """What `usage` of `model` costs in USD, at the shipped prices unless given others."""
    return (prices or shipped_prices()).cost_usd(model, usage)
