"""Amaranth hardware for SAMML graphs: token layout, stream plumbing, one module per op.

See docs/hardware.md for the conventions (token encoding, firing rule, port and memory interfaces).
"""

__all__ = ["token_layout", "token_signature", "encode", "decode", "StreamFIFO", "FanOut"]


def __getattr__(name):
    # Amaranth is imported on first use: `fuseflow hw --help` and `fuseflow boards --help` do not pay for it
    # (issue 42)
    if name in ("StreamFIFO", "FanOut"):
        from . import stream as module
    elif name in __all__:
        from . import token as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
