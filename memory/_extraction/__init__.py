"""Turning a batch of a group's conversation into memory operations: the prompt, reading and validating the model's
answer, and applying it. It must not know timers, buffers, leases or the relay (`_observation` hands it batches)."""

from .model_call import Generate, call_model
from .parse import parse_one_operation, shown_number
from .run import run_extraction
from .validate import TodoProposals

__all__ = ["Generate", "TodoProposals", "call_model", "parse_one_operation", "run_extraction", "shown_number"]
