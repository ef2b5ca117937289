"""Watching each group's conversation: its messages, their segments, when a batch goes on, the observation lease and
the relay among instances. It must not know the extraction prompt, the model or how operations are applied."""

from .scheduler import ExtractionScheduler
from .segments import EpisodeRequest, Segment
from .utterance import Utterance

__all__ = ["EpisodeRequest", "ExtractionScheduler", "Segment", "Utterance"]
