"""Episodes: what a group talked about in one stretch of its conversation (design 004 layer 2), kept by storage (the
model is in `_models`); it must not know the service or AstrBot."""
