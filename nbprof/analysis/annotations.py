"""Device ops attributed to the GPU-side ``record_function`` ranges (``gpu_user_annotation``) around them.

Kineto writes every ``record_function`` range that launched device work a second time on the device, as a
``gpu_user_annotation`` row on the stream of that work, from its first device op's start to its last one's
end. A device op belongs to the innermost such range on its device and stream that overlaps it: the
shortest one, as HTA's ``get_gpu_kernels_with_user_annotations`` picks the leaf of the stack
(``hta/analyzers/breakdown_analysis.py``, 0.5.0: ranges as ``[start, end)`` intervals, assigned longest
first so the shortest overlapping one wins).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace import schema
from ..trace.model import Trace
from .utilization import device_ops

__all__ = ["device_op_annotations"]


def device_op_annotations(trace: Trace, *, until_last_step: bool = False) -> pd.DataFrame:
    """Each device op with the innermost GPU annotation range overlapping it on its device and stream.

    Parameters
    ----------
    trace : nbprof.Trace
    until_last_step : bool, default False
        Only device ops launched before the last step (HTA's default window, see
        :func:`nbprof.analysis.utilization.device_ops`).

    Returns
    -------
    pandas.DataFrame
        :func:`~nbprof.analysis.utilization.device_ops`' rows and columns (``device``, ``stream``, ``ts_ns``,
        ``dur_ns``, ``end_ns`` in ns, ``cat``, ``name``, ``correlation``, ``kind``, ``runtime_ts_ns``,
        ``runtime_end_ns``, ``runtime_name``) plus ``annotation`` (the range's name; None where no range
        overlaps the op) and ``annotation_ts_ns`` (its start, ns; -1 where none). Empty (with these
        columns) without device ops.

    Notes
    -----
    Overlap, not containment: ranges are ``[start, end)`` and an op overlapping two ranges of the same
    length gets the one that starts later. Checked against HTA 0.5.0's ``tests/test_trace_analysis.py``
    ``test_get_gpu_kernels_with_user_annotations`` in ``tests/peers/test_peer_hta_analyses.py``.
    """
    d = device_ops(trace, until_last_step=until_last_step).reset_index(drop=True)
    name = np.full(len(d), None, dtype=object)
    start = np.full(len(d), -1, dtype=np.int64)
    ev = trace.events
    a = ev[ev["cat"].astype(str) == schema.GPU_USER_ANNOTATION]
    if len(d) and len(a):
        a_ts = a["ts_ns"].to_numpy(np.int64)
        a_end = a_ts + a["dur_ns"].to_numpy(np.int64)
        a_name = a["name"].astype(object).to_numpy()
        a_key = list(zip(a["device"].to_numpy(), a["stream"].to_numpy(), strict=True))
        longest_first = np.lexsort((a_ts, -(a_end - a_ts)))
        groups = d.groupby(["device", "stream"], sort=False).indices
        for i in longest_first:
            rows = groups.get(a_key[i])
            if rows is None:
                continue
            hit = rows[(d["ts_ns"].to_numpy()[rows] < a_end[i]) & (d["end_ns"].to_numpy()[rows] > a_ts[i])]
            name[hit] = a_name[i]
            start[hit] = a_ts[i]
    d["annotation"] = name
    d["annotation_ts_ns"] = start
    return d
