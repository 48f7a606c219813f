"""The portable backend: our own C kernels, the default and the fallback for every op; one emitter module per op family."""
