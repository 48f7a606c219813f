"""The custom backend: the user's own C kernels as a kernel library (their host check, host runs and device guards are in mcu/device)."""
