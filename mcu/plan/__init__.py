"""Stage 6: the execution order and the static memory plan (every tensor at a fixed arena offset), its overlap contracts and its drawing."""
