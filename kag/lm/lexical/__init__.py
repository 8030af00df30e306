"""``LexicalLM``: the offline default "model" — a lexical matcher (see :mod:`kag.lm.lexical.model`)."""

from kag.lm.lexical.model import LexicalLM
from kag.lm.lexical.schema import NameLookup

__all__ = ["LexicalLM", "NameLookup"]
