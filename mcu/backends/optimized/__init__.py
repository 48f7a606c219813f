"""The optimized backend: packed-weight and compact-weight kernels for convolutions and fully connected layers, specialised per model."""
