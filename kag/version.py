"""The package version and the distribution name (one place: the package, the servers and install hints read them)."""

__version__ = "0.1.0"

DISTRIBUTION = "graph-kag"
"""The name kag is installed under (``pip install graph-kag``); the module it installs stays ``kag``.

The registry's ``kag`` is another project (a Kaggle terminal UI), and ``openspg-kag`` installs a
top-level ``kag`` module too, so it cannot share an environment with this one.
"""


def pip_install(extra: str) -> str:
    """The command that installs kag with one extra, for error messages: ``pip install 'graph-kag[pdf]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
