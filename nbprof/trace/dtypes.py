"""Bytes per element of the tensor dtypes a trace names (Kineto's collective ``dtype`` arg, ``Input type``
texts): one table for the loader's message-size check and the collectives' message sizes
(``nbprof.analysis.distributed.comms``).

Message sizes are carried as float64 bytes by the collectives frame (NaN when unknown), so a size is
exact only up to :data:`MAX_MESSAGE_BYTES` (2**53 bytes, 8 PiB): the Kineto loader reads a collective
whose ``In``/``Out msg nelems`` times its dtype's size is beyond it as having no size (-1), reported
(kind ``msg_bytes_beyond_2_53``).
"""

from __future__ import annotations

#: dtype text (lower case) -> bytes per element
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "c10::float": 4, "double": 8, "float64": 8, "half": 2, "c10::half": 2,
    "float16": 2, "c10::bfloat16": 2, "bfloat16": 2, "long": 8, "int64": 8, "long int": 8, "int": 4,
    "int32": 4, "short": 2, "int16": 2, "unsigned char": 1, "uint8": 1, "byte": 1, "signed char": 1,
    "char": 1, "int8": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}

#: the largest message size (bytes) a float64 holds exactly
MAX_MESSAGE_BYTES = 2**53


def item_bytes(dtype: object) -> int | None:
    """Bytes per element of ``dtype`` (any case: ``"BFloat16"`` -> 2), None when not a known dtype text."""
    return DTYPE_BYTES.get(dtype.lower()) if isinstance(dtype, str) else None
