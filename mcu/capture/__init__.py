"""Stage 1: the user's model file loaded, captured with ``torch.export`` and lowered to the Edge dialect; the user's own source line behind every node."""
