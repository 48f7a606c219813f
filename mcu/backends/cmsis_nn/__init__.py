"""The CMSIS-NN backend: supported int8 layers routed to CMSIS-NN's ``arm_*_s8`` functions built from the user's CMSIS-NN sources."""
