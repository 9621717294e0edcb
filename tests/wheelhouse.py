"""Wheels made here, for setups that install from a local wheelhouse (no test reaches an
index): installed distributions packed again, and a tiny one no host has."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from importlib import metadata
from pathlib import Path

WHEEL = "Wheel-Version: 1.0\nGenerator: teaparty-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(
    folder: Path, name: str, version: str, files: dict[str, bytes], *, info: str | None = None
) -> Path:
    """A pure-Python wheel of `files` (paths inside the wheel) with its metadata."""
    info = info or f"{name.replace('-', '_')}-{version}.dist-info"
    files = {
        **{k: v for k, v in files.items() if k not in (f"{info}/RECORD", f"{info}/WHEEL")},
        f"{info}/METADATA": files.get(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        ),
        f"{info}/WHEEL": WHEEL.encode(),
    }
    record = [_record_line(path, data) for path, data in sorted(files.items())]
    record.append(f"{info}/RECORD,,")
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in sorted(files.items()):
            wheel.writestr(member, data)
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def repack(folder: Path, distribution: str) -> Path:
    """An installed pure-Python distribution as a wheel again (its scripts are made anew
    from its entry points by the installer)."""
    dist = metadata.distribution(distribution)
    version = dist.version
    info = next(str(f).split("/")[0] for f in dist.files or () if str(f).endswith("/METADATA"))
    files: dict[str, bytes] = {}
    for file in dist.files or ():
        text = str(file)
        if text.startswith("..") or "__pycache__" in text or text.endswith(".pyc"):
            continue
        leaf = text.split("/")[-1]
        if text.startswith(info + "/") and leaf in (
            "RECORD",
            "INSTALLER",
            "REQUESTED",
            "direct_url.json",
            "WHEEL",
        ):
            continue
        files[text] = Path(str(dist.locate_file(file))).read_bytes()
    return write_wheel(folder, info.split("-")[0], version, files, info=info)


def wheelhouse(folder: Path, *distributions: str) -> Path:
    """`folder` with wheels of the installed `distributions` and of `tinylib` 1.0."""
    folder.mkdir(parents=True, exist_ok=True)
    for distribution in distributions:
        repack(folder, distribution)
    write_wheel(
        folder, "tinylib", "1.0", {"tinylib/__init__.py": b"def double(x):\n    return 2 * x\n"}
    )
    return folder


PYTEST = ("pytest", "iniconfig", "packaging", "pluggy", "pygments", "setuptools")
