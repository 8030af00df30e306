"""Sphinx configuration of kag's documentation site (``make docs`` builds it into ``site/``).

Everything the site shows is built here, offline: the API reference from the docstrings
(``docs/_ext/kagdocs.py`` enumerates each package's ``__all__``), the notebook executed by
myst-nb, the benchmark tables read from ``benchmarks/results.md``. The theme (furo) ships its
own CSS, JS and fonts stack; nothing is fetched when a page is viewed.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # the kag under this checkout, not another installed copy
sys.path.insert(0, str(DOCS / "_ext"))

import zmq  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from kagdocs import goals_met  # noqa: E402

from kag.version import __version__  # noqa: E402

project = "kag"
author = "the kag authors"
copyright = "the kag authors, Apache-2.0"
release = version = __version__

extensions = [
    "myst_nb",  # Markdown pages (MyST), the executed notebook and executed Markdown notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the Google-style ``Args:`` sections some docstrings use
    "kagdocs",
]

root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints", "_ext"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}

# MyST: fenced code blocks carry an info string such as ``python notest``; the first word is the language
myst_enable_extensions = ["colon_fence", "deflist", "substitution"]
myst_heading_anchors = 3
# {{ goals_met }} on the performance page: counted from the same results file as its table
myst_substitutions = {"goals_met": goals_met((ROOT / "benchmarks" / "results.md").read_text(encoding="utf-8"))}

# notebooks: executed at build time (fresh outputs every build, the pictures included), each in a
# temporary directory so nothing it writes lands in the source tree; a failing cell fails the build
nb_execution_mode = "force"
nb_execution_in_temp = True
nb_execution_timeout = 180
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# the executed pages' kernels talk to the build over CurveZMQ-encrypted sockets (the kernelspec declares
# support; jupyter_client's default is plain TCP, and each kernel then warned about it on stderr,
# whatever -q says); without CurveZMQ in this pyzmq, over IPC sockets, which draw no warning either
if zmq.has("curve"):
    KernelManager.transport_encryption.default_value = "auto"
else:
    KernelManager.transport.default_value = "ipc"
# a page with Jupyter widgets (a tqdm bar) would load require.js and the widget manager from CDNs: the
# site loads nothing from elsewhere, so widgets show their text form instead
nb_ipywidgets_js: dict[str, dict[str, str]] = {}

# autodoc
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"  # the constructor's signature on the class line
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_inherit_docstrings = False  # pydantic's own docstrings are not kag's API
python_use_unqualified_type_names = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# HTML: furo, no external assets (the theme uses the system font stack, search is a local index)
html_theme = "furo"
html_title = f"kag {release}"
html_static_path = ["_static"]
html_css_files = ["kag.css"]
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
pygments_style = "friendly"
pygments_dark_style = "monokai"

nitpicky = False  # docstrings name private helpers and third-party types; unresolved names stay text
