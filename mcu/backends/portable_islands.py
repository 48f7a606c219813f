"""Emitters of the int8 kernels that replace fp32 islands (issue 18; joins
:data:`mcu.backends.portable.EMITTERS`, program kernel ids 250-259): maximum and minimum take the
int8 add's broadcasting parameters (mcu_binary_s8_params)."""

from __future__ import annotations


def emitters() -> dict:
    from mcu.backends.portable import _binary_s8

    return {("maximum", "int8"): _binary_s8("maximum"), ("minimum", "int8"): _binary_s8("minimum")}
