"""Topics over time and the member graph of one group (design 001 §8.4, issue 36)."""
