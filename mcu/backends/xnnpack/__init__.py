"""XNNPACK as a delegate backend for Linux boards."""
