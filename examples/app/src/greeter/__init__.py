"""A tiny application on top of the public example stack: it compiles a C declaration with cffi."""

from __future__ import annotations

import cffi

__version__ = "0.1.0"


def greet(name: str) -> str:
    ffi = cffi.FFI()
    ffi.cdef("size_t strlen(const char *);")
    libc = ffi.dlopen(None)
    return f"hello {name} ({libc.strlen(name.encode())} bytes, cffi {cffi.__version__})"
