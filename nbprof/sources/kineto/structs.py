"""Typed msgspec structs of one trace event, and the shared decoders.

``_Event`` holds the top-level fields of one Trace Event Format event (``args`` left as
``msgspec.Raw``, decoded later per category group by ``args``); ``_LooseEvent`` allows any
phase string and string-typed ``ts``/``dur`` (the fallback when the typed decode rejects a value).
"""

from __future__ import annotations

from typing import Literal

import msgspec

_EMPTY_RAW = msgspec.Raw()
_EMPTY_OBJ = msgspec.Raw(b"{}")
_Int = int | str | None
_Num = int | float | str | None
_NAN = float("nan")


# Every phase of the Trace Event Format (Google's "Trace Event Format" document): decoded as one
# shared str object each, which makes the phase column cheap to code. Another value makes the
# decode fall back to ``_LooseEvent`` (any string), whose phase is reported as unsupported.
_Phase = Literal["X", "B", "E", "i", "I", "C", "b", "n", "e", "s", "t", "f", "S", "T", "p", "F", "P",
                 "N", "O", "D", "M", "V", "v", "R", "c", "(", ")", ""]


class _Event(msgspec.Struct, gc=False):
    """One trace event, ``args`` left undecoded: they are decoded per category group (``_ARG_STRUCTS``)."""

    ph: _Phase = ""  # no "ph": reported as an unsupported phase
    cat: str | None = None
    name: str | int | float | None = ""
    pid: int | str | None = -1
    tid: int | str | None = -1
    ts: float | None = None
    dur: float | None = None
    id: int | float | str | None = None
    s: str | None = None
    args: msgspec.Raw = _EMPTY_OBJ


class _LooseEvent(_Event, gc=False):
    """The same event with any phase string and string-typed ``ts``/``dur`` allowed (reported and
    converted by ``_to_float``)."""

    # msgspec lets a Struct subclass redefine a field's type (here: wider, for the loose fallback
    # decode); mypy reads it as an incompatible override
    ph: str = ""  # type: ignore[assignment]
    ts: float | str | None = None  # type: ignore[assignment]
    dur: float | str | None = None  # type: ignore[assignment]


class _TsOnly(msgspec.Struct, gc=False):
    ts: msgspec.Raw = _EMPTY_RAW


_EVENT_DECODER = msgspec.json.Decoder(list[_Event])
_LOOSE_EVENT_DECODER = msgspec.json.Decoder(list[_LooseEvent])
_ONE_EVENT_DECODER = msgspec.json.Decoder(_LooseEvent)
_TS_DECODER = msgspec.json.Decoder(list[_TsOnly])
_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_ANY_DECODER = msgspec.json.Decoder()
