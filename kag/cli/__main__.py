"""``python -m kag.cli``: the same as the ``kag`` command."""

from kag.cli import main

raise SystemExit(main())
