"""deferred-cleanup: hand cleanup work from a foreign native thread to the
CPython main thread through ``Py_AddPendingCall``."""

from . import _native  # noqa: F401

__all__ = ["_native"]
