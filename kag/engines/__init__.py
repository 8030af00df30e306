"""Engine adapters: kag's ingest pipeline run on an existing distributed engine.

Nothing below the command line imports this package; each engine's own dependency is an
optional extra (``pip install 'graph-kag[ray]'`` for :mod:`kag.engines.ray`). The pieces that
need no engine (the job's key, the manifest of finished documents, the replayed model
answers, the summary) are in :mod:`kag.engines.pipeline`.
"""

from __future__ import annotations

__all__: list[str] = []
