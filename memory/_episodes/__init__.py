"""Episodes: what a group talked about in one stretch of its conversation (design 004 layer 2)."""
