"""kag inside the frameworks people already use: LangChain and LlamaIndex.

Each adapter is a module of its own, imported only when asked for, so ``import kag`` and
``import kag.integrations`` never need the frameworks:

* :mod:`kag.integrations.langchain` (``pip install 'graph-kag[langchain]'``): ``KagRetriever``,
  ``triplet_search_tool``, ``knowledge_tool``;
* :mod:`kag.integrations.llamaindex` (``pip install 'graph-kag[llamaindex]'``): ``KagLlamaRetriever``,
  ``triplet_search_tool``, ``knowledge_tool``.

Importing an adapter without its framework raises :class:`kag.errors.MissingDependencyError`
(a ``ConfigError`` and an ``ImportError``) that names the extra to install.
"""

__all__: list[str] = []
