"""The custom backend: the user's own C kernels, checked in a sanitized child process and guarded on the device."""
