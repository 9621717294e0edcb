"""Protected paths: which changed files need the decider's approval before a push.

A path is protected when a built-in pattern matches it (`BUILT_IN`: CI and TeaParty
configuration, CODEOWNERS, dependency manifests and lock files, agent instruction files)
or a pattern its project lists (`protected_paths` in .teaparty/project.yaml). Patterns are
globs over `/`-separated paths, as in .gitignore:

- `*` and `?` match within one folder or file name, `[...]` is a class (`[!...]` negated),
  `**` as a whole segment spans any number of folders, `\\` escapes the next character;
- a pattern without a `/` matches a name in any folder (`*.sql`, `Cargo.toml`); one with
  a `/` matches from the repository's root (`migrations/**`; a leading `/` only anchors);
- a pattern that matches a folder covers everything in it (`.claude`, `docs/adr/`).

Case is ignored, in patterns and paths alike: a checkout on a case-insensitive disk turns
`.GitHub/` into `.github/`, so matching errs towards asking. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# What is protected with no word from the project, by why (docs/configuration.md lists it).
BUILT_IN: Mapping[str, tuple[str, ...]] = {
    "CI, repository and TeaParty settings": (
        "/.github/**",
        "/.teaparty/**",
        "CODEOWNERS",
        ".gitmodules",
    ),
    "dependency manifests and lock files": (
        *("pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt", "requirements*.in"),
        *("**/requirements/*.txt", "**/requirements/*.in", "constraints*.txt", "Pipfile"),
        *("Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock", "environment.yml", "pip.conf"),
        *("package.json", "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", ".npmrc"),
        *(".yarnrc", ".yarnrc.yml", "pnpm-lock.yaml", "pnpm-workspace.yaml", "bun.lock"),
        *("bun.lockb", "deno.json", "deno.jsonc", "deno.lock", "Cargo.toml", "Cargo.lock"),
        *("go.mod", "go.sum", "go.work", "go.work.sum", "Gemfile", "Gemfile.lock", "*.gemspec"),
        *("composer.json", "composer.lock", "build.gradle", "build.gradle.kts"),
        *("settings.gradle", "settings.gradle.kts", "gradle.lockfile", "libs.versions.toml"),
        *("gradle-wrapper.properties", "pom.xml", "*.csproj", "*.fsproj", "*.vbproj"),
        *("packages.config", "packages.lock.json", "Directory.Packages.props", "nuget.config"),
        *("Directory.Build.props", "Package.swift", "Package.resolved", "Podfile"),
        *("Podfile.lock", "Cartfile", "Cartfile.resolved", "mix.exs", "mix.lock"),
        *("pubspec.yaml", "pubspec.lock", "*.cabal", "cabal.project", "stack.yaml"),
        *("flake.nix", "flake.lock", "MODULE.bazel", "WORKSPACE", "WORKSPACE.bazel"),
    ),
    "agent instruction files": (
        *("CLAUDE.md", "CLAUDE.local.md", "AGENTS.md", "AGENT.md", "GEMINI.md"),
        *(".cursorrules", ".windsurfrules", ".clinerules", ".roorules", ".goosehints"),
        *(".aider.conf.yml", ".cursor", ".claude", ".windsurf", ".roo", ".gemini"),
    ),
}
PATTERN_MAX_CHARS = 300


class PatternError(ValueError):
    """A protected-path pattern that cannot be read: what is wrong with it."""


@dataclass(frozen=True)
class Matcher:
    """Built-in patterns and a project's own, compiled once."""

    patterns: tuple[str, ...]
    _compiled: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(compile_pattern(p) for p in self.patterns))

    @classmethod
    def of(cls, project: Sequence[str] = ()) -> Matcher:
        """The built-in patterns and then `project`'s (PatternError on a bad one)."""
        built_in = (p for group in BUILT_IN.values() for p in group)
        return cls((*built_in, *project))

    def protects(self, *paths: str | None) -> bool:
        """Whether any of `paths` is protected: give a rename's old and new path both."""
        return any(
            regex.fullmatch(path.casefold()) is not None
            for path in paths
            if path
            for regex in self._compiled
        )

    def protected(self, paths: Iterable[str]) -> list[str]:
        """The protected ones of `paths`, in their order."""
        return [path for path in paths if self.protects(path)]


def check_pattern(pattern: str) -> str:
    """`pattern` if it can be read, else PatternError saying why (config validation)."""
    compile_pattern(pattern)
    return pattern


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regular expression a path (casefolded) must fully match to be protected."""
    text = pattern.strip().casefold()
    if not text or text == "/":
        raise PatternError("an empty pattern")
    if len(text) > PATTERN_MAX_CHARS:
        raise PatternError(f"longer than {PATTERN_MAX_CHARS} characters")
    if any(ord(c) < 32 or c == "\x7f" for c in text):
        raise PatternError(f"{pattern!r} has a control character")
    anchored = text.startswith("/") or "/" in text.strip("/")
    segments = text.strip("/").split("/")
    if any(s in (".", "..", "") for s in segments):
        raise PatternError(f"{pattern!r} has an empty, '.' or '..' segment")
    body = "".join(
        _segment_regex(s, last=i == len(segments) - 1, pattern=pattern)
        for i, s in enumerate(segments)
    )
    prefix = "" if anchored else "(?:[^/]+/)*"
    return re.compile(f"{prefix}{body}(?:/.*)?", re.DOTALL)


def _segment_regex(segment: str, *, last: bool, pattern: str) -> str:
    if segment == "**":
        return ".+" if last else "(?:[^/]+/)*"
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            out.append("[^/]*")
            while index + 1 < len(segment) and segment[index + 1] == "*":
                index += 1
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end, cls = _class(segment, index, pattern)
            out.append(cls)
            index = end
        elif char == "\\":
            index += 1
            if index == len(segment):
                raise PatternError(f"{pattern!r} ends with a lone '\\'")
            out.append(re.escape(segment[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out) + ("" if last else "/")


def _class(segment: str, start: int, pattern: str) -> tuple[int, str]:
    """A `[...]` class at `start`: where it ends and its regular expression."""
    index = start + 1
    negate = index < len(segment) and segment[index] in "!^"
    index += negate
    members: list[str] = []
    first = True
    while index < len(segment) and (segment[index] != "]" or first):
        char = segment[index]
        members.append("-" if char == "-" else re.escape(char))
        index += 1
        first = False
    if index >= len(segment):
        raise PatternError(f"{pattern!r} has a '[' without its ']'")
    return index, f"[{'^' if negate else ''}{''.join(members)}{'/' if negate else ''}]"
