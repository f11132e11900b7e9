"""NVTX ranges and marks for user code: ``with nbprof.nvtx.range("step")`` or ``@nbprof.nvtx.range()``.

Calls the NVTX C ABI through :mod:`ctypes` on ``libnvtx3interop.so.1`` from PyPI's
``nvidia-nvtx-cu12`` (``pip install nbprof[nvtx]``); a profiler that injects NVTX (Nsight Systems
``-t nvtx``) records them as ``NVTX_EVENTS`` rows (eventType 59 push/pop, 60 start/end, 34 mark).
Without that library, or without a profiler attached, every call is a cheap no-op: NVTX functions
return at once when no injection library is loaded.

Why not PyPI's ``nvtx`` package: with Debian's nsys 2022.4 its ranges were not recorded (only a
domain-destroy event, see ``shared/notes/nsys-on-cpu.md``), while the C ABI entry points are.

``NBPROF_NVTX=0`` disables every call. ``NBPROF_NVTX_LIB`` names another library exporting the
NVTX v3 ABI (e.g. ``libnvToolsExt.so.1``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["range", "mark", "start_range", "end_range", "push", "pop", "available", "library_path"]

_lock = threading.Lock()
_lib: Any = None
_lib_path: str | None = None
_tried = False
_domains: dict[str, int] = {}

# nvToolsExt.h constants
_NVTX_VERSION = 3
_COLOR_ARGB = 1
_MESSAGE_ASCII = 1
_PAYLOAD_U64, _PAYLOAD_I64, _PAYLOAD_DOUBLE = 1, 2, 3


class _Payload(ctypes.Union):
    _fields_ = [("ullValue", ctypes.c_uint64), ("llValue", ctypes.c_int64), ("dValue", ctypes.c_double)]


class _Message(ctypes.Union):
    _fields_ = [("ascii", ctypes.c_char_p), ("unicode", ctypes.c_wchar_p), ("registered", ctypes.c_void_p)]


class _EventAttributes(ctypes.Structure):
    """``nvtxEventAttributes_v2`` (nvToolsExt.h)."""

    _fields_ = [
        ("version", ctypes.c_uint16),
        ("size", ctypes.c_uint16),
        ("category", ctypes.c_uint32),
        ("colorType", ctypes.c_int32),
        ("color", ctypes.c_uint32),
        ("payloadType", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        ("payload", _Payload),
        ("messageType", ctypes.c_int32),
        ("message", _Message),
    ]


_NAMED_COLORS = {
    "green": 0xFF76B900, "blue": 0xFF1F77B4, "orange": 0xFFFF7F0E, "red": 0xFFD62728,
    "purple": 0xFF9467BD, "grey": 0xFF7F7F7F, "gray": 0xFF7F7F7F, "yellow": 0xFFBCBD22, "cyan": 0xFF17BECF,
}


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("NBPROF_NVTX_LIB")
    if env:
        out.append(env)
    try:
        import nvidia.nvtx as _nv  # namespace package from nvidia-nvtx-cu12

        for base in list(getattr(_nv, "__path__", [])):
            out.append(os.path.join(base, "lib", "libnvtx3interop.so.1"))
    except ImportError:
        pass
    out += ["libnvtx3interop.so.1", "libnvToolsExt.so.1"]
    return out


def _load():
    global _lib, _lib_path, _tried
    if _tried:
        return _lib
    with _lock:
        if _tried:
            return _lib
        if os.environ.get("NBPROF_NVTX", "1") not in ("0", "false", "no", "off"):
            for cand in _candidates():
                if os.path.sep in cand and not os.path.exists(cand):
                    continue
                try:
                    lib = ctypes.CDLL(cand)
                    lib.nvtxRangePushA  # noqa: B018 -- must export the NVTX ABI
                except (OSError, AttributeError):
                    continue
                lib.nvtxRangePushA.argtypes = [ctypes.c_char_p]
                lib.nvtxRangePushA.restype = ctypes.c_int
                lib.nvtxRangePop.restype = ctypes.c_int
                lib.nvtxMarkA.argtypes = [ctypes.c_char_p]
                lib.nvtxRangeStartA.argtypes = [ctypes.c_char_p]
                lib.nvtxRangeStartA.restype = ctypes.c_uint64
                lib.nvtxRangeEnd.argtypes = [ctypes.c_uint64]
                ptr = ctypes.POINTER(_EventAttributes)
                lib.nvtxDomainCreateA.argtypes = [ctypes.c_char_p]
                lib.nvtxDomainCreateA.restype = ctypes.c_void_p
                lib.nvtxDomainRangePushEx.argtypes = [ctypes.c_void_p, ptr]
                lib.nvtxDomainRangePushEx.restype = ctypes.c_int
                lib.nvtxDomainRangePop.argtypes = [ctypes.c_void_p]
                lib.nvtxDomainRangeStartEx.argtypes = [ctypes.c_void_p, ptr]
                lib.nvtxDomainRangeStartEx.restype = ctypes.c_uint64
                lib.nvtxDomainRangeEnd.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
                lib.nvtxDomainMarkEx.argtypes = [ctypes.c_void_p, ptr]
                _lib, _lib_path = lib, cand
                # The first NVTX call of a process initialises the injection (nsys-on-cpu.md):
                # do it now so the user's first range is recorded too.
                if hasattr(lib, "nvtxInitialize"):
                    lib.nvtxInitialize.argtypes = [ctypes.c_void_p]
                    lib.nvtxInitialize(None)
                break
        _tried = True
    return _lib


def available() -> bool:
    """True when an NVTX library was loaded (calls reach a profiler when one is attached)."""
    return _load() is not None


def library_path() -> str | None:
    """Path (or soname) of the NVTX library in use, None when NVTX calls are no-ops."""
    _load()
    return _lib_path


def _color(color: int | str | None) -> int | None:
    if color is None:
        return None
    if isinstance(color, str):
        if color.lower() in _NAMED_COLORS:
            return _NAMED_COLORS[color.lower()]
        c = int(color.lstrip("#"), 16)
        return c | 0xFF000000 if c <= 0xFFFFFF else c
    return int(color)


def _domain(lib, name: str | None):
    if name is None:
        return None
    with _lock:
        if name not in _domains:
            _domains[name] = lib.nvtxDomainCreateA(name.encode())
        return _domains[name]


def _attrs(message: str, color, category: int | None, payload) -> _EventAttributes:
    a = _EventAttributes()
    a.version = _NVTX_VERSION
    a.size = ctypes.sizeof(_EventAttributes)
    a.category = int(category or 0)
    c = _color(color)
    if c is not None:
        a.colorType = _COLOR_ARGB
        a.color = c & 0xFFFFFFFF
    if payload is not None:
        if isinstance(payload, float):
            a.payloadType, a.payload.dValue = _PAYLOAD_DOUBLE, payload
        elif payload < 0:
            a.payloadType, a.payload.llValue = _PAYLOAD_I64, int(payload)
        else:
            a.payloadType, a.payload.ullValue = _PAYLOAD_U64, int(payload)
    a.messageType = _MESSAGE_ASCII
    a.message.ascii = message.encode()
    return a


def _plain(color, category, payload) -> bool:
    return color is None and category is None and payload is None


def push(message: str, *, domain: str | None = None, color: int | str | None = None,
         category: int | None = None, payload: int | float | None = None) -> None:
    """Push a push/pop range (``nvtxRangePushA`` / ``nvtxDomainRangePushEx``); no-op without NVTX."""
    lib = _load()
    if lib is None:
        return
    if domain is None and _plain(color, category, payload):
        lib.nvtxRangePushA(message.encode())
        return
    a = _attrs(message, color, category, payload)
    lib.nvtxDomainRangePushEx(_domain(lib, domain), ctypes.byref(a))


def pop(*, domain: str | None = None) -> None:
    """Pop the innermost push/pop range of this thread (in ``domain`` when given)."""
    lib = _load()
    if lib is None:
        return
    if domain is None:
        lib.nvtxRangePop()
    else:
        lib.nvtxDomainRangePop(_domain(lib, domain))


def start_range(message: str, *, domain: str | None = None, color: int | str | None = None,
                category: int | None = None, payload: int | float | None = None) -> int:
    """Start a start/end range (may end on another thread); returns its id (0 without NVTX)."""
    lib = _load()
    if lib is None:
        return 0
    if domain is None and _plain(color, category, payload):
        return int(lib.nvtxRangeStartA(message.encode()))
    a = _attrs(message, color, category, payload)
    return int(lib.nvtxDomainRangeStartEx(_domain(lib, domain), ctypes.byref(a)))


def end_range(range_id: int, *, domain: str | None = None) -> None:
    """End a range started by :func:`start_range`."""
    lib = _load()
    if lib is None or not range_id:
        return
    if domain is None:
        lib.nvtxRangeEnd(ctypes.c_uint64(range_id))
    else:
        lib.nvtxDomainRangeEnd(_domain(lib, domain), ctypes.c_uint64(range_id))


def mark(message: str, *, domain: str | None = None, color: int | str | None = None,
         category: int | None = None, payload: int | float | None = None) -> None:
    """An instant NVTX marker (``nvtxMarkA`` / ``nvtxDomainMarkEx``)."""
    lib = _load()
    if lib is None:
        return
    if domain is None and _plain(color, category, payload):
        lib.nvtxMarkA(message.encode())
        return
    a = _attrs(message, color, category, payload)
    lib.nvtxDomainMarkEx(_domain(lib, domain), ctypes.byref(a))


class range(contextlib.ContextDecorator):  # mirrors nvtx.annotate / torch.cuda.nvtx.range
    """An NVTX push/pop range as a context manager or decorator.

    Parameters
    ----------
    message : str, optional
        Range name. As a decorator without a message, the function's ``__qualname__`` is used.
    domain : str, optional
        NVTX domain (default: the global domain).
    color : int or str, optional
        ARGB integer, ``"#rrggbb"`` or a name (``"green"``, ``"blue"``...).
    category : int, optional
        NVTX category id.
    payload : int or float, optional
        Payload value (e.g. the step number), recorded in ``NVTX_EVENTS.int64Value``/``uint64Value``/``doubleValue``.
    start_end : bool
        Use a start/end range (``nvtxRangeStartEx``) instead of push/pop (needed across threads or
        generators).

    Examples
    --------
    >>> import nbprof.nvtx
    >>> with nbprof.nvtx.range("step", payload=3):
    ...     pass
    >>> @nbprof.nvtx.range()
    ... def forward(x):
    ...     return x
    >>> forward(1)
    1
    """

    def __init__(self, message: str | None = None, *, domain: str | None = None, color: int | str | None = None,
                 category: int | None = None, payload: int | float | None = None, start_end: bool = False) -> None:
        self.message = message
        self.domain = domain
        self.color = color
        self.category = category
        self.payload = payload
        self.start_end = start_end
        self._ids: list[int] = []

    def __call__(self, func: _F) -> _F:  # decorator
        if self.message is None:
            self.message = getattr(func, "__qualname__", getattr(func, "__name__", "function"))
        inner = super().__call__(func)
        return cast(_F, functools.wraps(func)(inner))

    def __enter__(self) -> range:
        msg = self.message or "range"
        kw: dict[str, Any] = {"domain": self.domain, "color": self.color, "category": self.category, "payload": self.payload}
        if self.start_end:
            self._ids.append(start_range(msg, **kw))
        else:
            push(msg, **kw)
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        if self.start_end:
            end_range(self._ids.pop() if self._ids else 0, domain=self.domain)
        else:
            pop(domain=self.domain)
        return False
