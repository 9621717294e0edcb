"""Ecosystems a setup may name in `network:` instead of hosts, and the hosts each stands for.

Each is what the ecosystem's own installer reaches for public packages by default; a
private index or mirror is named by its host beside the preset.
"""

from __future__ import annotations

from collections.abc import Mapping

PRESETS: Mapping[str, tuple[str, ...]] = {
    "python": ("pypi.org", "files.pythonhosted.org"),
    "node": ("registry.npmjs.org", "registry.yarnpkg.com", "repo.yarnpkg.com"),
    "rust": ("crates.io", "index.crates.io", "static.crates.io", "static.rust-lang.org"),
    "go": ("proxy.golang.org", "sum.golang.org"),
    "ruby": ("rubygems.org", "index.rubygems.org"),
    "java": (
        *("repo.maven.apache.org", "repo1.maven.org"),
        *("plugins.gradle.org", "services.gradle.org", "downloads.gradle.org"),
    ),
    "php": ("repo.packagist.org", "packagist.org"),
    "dotnet": ("api.nuget.org",),
    "github": ("github.com", "codeload.github.com", "objects.githubusercontent.com"),
}


def hosts_of(names: tuple[str, ...]) -> tuple[str, ...]:
    """The hosts `names` stand for: each preset's, each host itself, in order, once."""
    found: dict[str, None] = {}
    for name in names:
        found.update(dict.fromkeys(PRESETS.get(name, (name,))))
    return tuple(found)
