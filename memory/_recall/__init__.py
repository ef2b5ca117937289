"""Which memories go into a reply's prompt; it reads storage (vectors included) and must not know the service or
AstrBot.

Lexical (`lexical.py`) and optional semantic (`semantic.py`) relevance, ranked within the prompt budget
(`ranking.py`) by `Recall` (`recall.py`)."""

from .lexical import LexicalIndex
from .recall import Recall, semantic_similarities
from .semantic import VectorStore, combine, fusion

__all__ = ["LexicalIndex", "Recall", "VectorStore", "combine", "fusion", "semantic_similarities"]
