"""The efficiency frames: per operator, per kernel and per step (MFU), against the device's peaks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...trace.model import Trace
from ..kernels import kernel_summary
from ..operators import operator_summary
from ..steps import step_windows
from .device_peaks import Peaks, peaks
from .work_models import kernel_work, op_work

#: Columns :func:`operator_efficiency` / :func:`kernel_efficiency` add.
EFFICIENCY_COLUMNS = ["flops", "bytes", "achieved_tflops_per_s", "achieved_gb_per_s", "arithmetic_intensity",
                      "peak_tflops_per_s", "peak_gb_per_s", "peak_ratio", "bound", "above_roof"]


# ------------------------------------------------------------------------------------------- frames

def _add_rates(df: pd.DataFrame, time_ns: np.ndarray, kinds: np.ndarray, dtypes: np.ndarray, pk: Peaks) -> None:
    """Add the rate / roofline columns in place (flops, bytes already present)."""
    fl = df["flops"].to_numpy(dtype=np.float64)
    by = df["bytes"].to_numpy(dtype=np.float64)
    t = np.where(time_ns > 0, time_ns.astype(np.float64), np.nan)
    df["achieved_tflops_per_s"] = fl / t / 1e3  # FLOP/ns = GFLOP/s
    df["achieved_gb_per_s"] = by / t  # bytes/ns = GB/s
    with np.errstate(divide="ignore", invalid="ignore"):
        df["arithmetic_intensity"] = np.where(by > 0, fl / by, np.nan)
    peak = np.array([pk.compute_peak(str(d), str(k)) if isinstance(d, str) else np.nan
                     for d, k in zip(dtypes, kinds, strict=True)], dtype=np.float64)
    bw = pk.bytes_per_s
    df["peak_tflops_per_s"] = peak / 1e12
    df["peak_gb_per_s"] = bw / 1e9
    ai = df["arithmetic_intensity"].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        roof = np.minimum(peak, ai * bw)  # FLOP/s the roofline allows at this intensity
        ratio_c = (fl / (t * 1e-9)) / roof
        ratio_m = (by / (t * 1e-9)) / bw
    df["peak_ratio"] = np.where(fl > 0, ratio_c, ratio_m)
    ridge = peak / bw
    bound = np.where(np.isnan(ai) | np.isnan(ridge), np.array(None, dtype=object),
                     np.where(ai >= ridge, "compute", "memory").astype(object))
    bound = np.where((fl <= 0) & (by > 0) & ~np.isnan(ridge), "memory", bound)
    df["bound"] = pd.Series(bound, index=df.index, dtype=object)
    # an achieved rate above its peak is impossible: the work model or the peak is wrong for this row
    with np.errstate(invalid="ignore"):
        df["above_roof"] = (fl / (t * 1e-9) > peak * (1 + 1e-9)) | (by / (t * 1e-9) > bw * (1 + 1e-9))


def _time_column(trace: Trace, frame: pd.DataFrame) -> tuple[np.ndarray, str]:
    if trace.has_device and "total_device_ns" in frame and int(frame["total_device_ns"].sum()) > 0:
        return frame["total_device_ns"].to_numpy(), "total_device_ns"
    return frame["total_host_ns"].to_numpy(), "total_host_ns"


def operator_efficiency(trace: Trace, *, peaks_: Peaks | None = None, modelled_only: bool = True) -> pd.DataFrame:
    """``operator_summary(trace, group_by="shapes")`` rows with the efficiency columns added.

    Parameters
    ----------
    trace : Trace
        Recorded with ``record_shapes=True`` (without shapes no row has a model).
    peaks_ : Peaks, optional
        Default :func:`peaks` of device 0.
    modelled_only : bool, default True
        Keep only rows with a work model.

    Returns
    -------
    pandas.DataFrame
        The summary's columns (:func:`nbprof.analysis.operators.operator_summary`: ``name``,
        ``input_dims``, ``cat``, ``count``, ``self_host_ns``, ``total_host_ns``, ``self_device_ns``,
        ``total_device_ns``, ``host_mem_bytes``, ``self_host_mem_bytes``, ``device_mem_bytes``,
        ``self_device_mem_bytes``, ``avg_host_ns``, ``avg_device_ns``; its ``flops`` renamed
        ``recorded_flops``: torch's own count, NaN where not recorded), then ``flops`` (FLOP over all
        calls, float64: the work model's where there is one, else torch's recorded count; they differ
        only where torch's rule undercounts, a broadcast ``aten::mul``/``add`` and causal attention,
        and the bias add of ``addmm``),
        ``bytes`` (bytes moved over all calls), ``kind``, ``dtype``, ``time_ns`` (the time the rates use:
        ``total_device_ns`` on a device trace, else ``total_host_ns``), ``achieved_tflops_per_s``
        (10^12 FLOP/s), ``achieved_gb_per_s`` (10^9 bytes/s), ``arithmetic_intensity`` (FLOP/byte),
        ``peak_tflops_per_s``, ``peak_gb_per_s``, ``peak_ratio`` (achieved / roofline at this
        intensity, 0..1; the bandwidth ratio for zero-FLOP ops), ``bound`` (``compute`` when the
        intensity is at or above the ridge point peak/bandwidth, else ``memory``; None when the peaks
        are unknown), ``above_roof`` (bool: the achieved FLOP/s above the compute peak or the bytes/s
        above the memory bandwidth -- impossible, so the work model or the peak does not fit this row:
        operands served from cache rather than DRAM, an algorithm doing fewer FLOPs than the model counts;
        never a utilisation to read). Sorted by ``time_ns`` descending.
    """
    pk = peaks_ if peaks_ is not None else peaks(trace)
    summ = operator_summary(trace, group_by="shapes").rename(columns={"flops": "recorded_flops"})
    w = op_work(trace)
    w = w[~w["merged"].astype(bool)] if len(w) else w
    if len(w):
        g = w.groupby(["name", "input_dims"], sort=False).agg(
            model_flops=("flops", "sum"), bytes=("bytes", "sum"), kind=("kind", "first"), dtype=("dtype", "first"))
        out = summ.merge(g.reset_index(), on=["name", "input_dims"], how="left")
    else:
        out = summ.assign(model_flops=np.nan, bytes=np.nan, kind=None, dtype=None)
    rec = out["recorded_flops"].to_numpy(dtype=np.float64)
    model = out["model_flops"].to_numpy(dtype=np.float64)
    out["flops"] = np.where(np.isnan(model), rec, model)
    out = out.drop(columns=["model_flops"])
    if modelled_only:
        out = out[out["kind"].notna()].reset_index(drop=True)
    time_ns, _ = _time_column(trace, out)
    out["time_ns"] = time_ns.astype(np.int64)
    _add_rates(out, time_ns, out["kind"].to_numpy(), out["dtype"].to_numpy(), pk)
    return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def kernel_efficiency(trace: Trace, *, peaks_: Peaks | None = None, modelled_only: bool = True) -> pd.DataFrame:
    """``kernel_summary(trace)`` rows (by kernel name) with the efficiency columns added.

    Returns
    -------
    pandas.DataFrame
        The summary's columns (:func:`nbprof.analysis.kernels.kernel_summary`: ``name``, ``instances``,
        ``total_ns``, ``avg_ns``, ``med_ns``, ``min_ns``, ``max_ns``, ``std_ns``, ``gpu_time_ratio``), then
        ``flops`` / ``bytes`` (FLOP / bytes over all instances, from :func:`kernel_work`), ``kind``,
        ``dtype``, ``op_name`` and ``input_dims`` (of the launching op that contributed most), and the
        rate columns of :func:`operator_efficiency` computed over ``total_ns``: ``achieved_tflops_per_s``,
        ``achieved_gb_per_s``, ``arithmetic_intensity``, ``peak_tflops_per_s``, ``peak_gb_per_s``,
        ``peak_ratio``, ``bound``, ``above_roof``. Sorted by ``total_ns`` descending.
    """
    pk = peaks_ if peaks_ is not None else peaks(trace)
    summ = kernel_summary(trace)
    kw = kernel_work(trace)
    if len(kw):
        kw = kw.sort_values("flops", ascending=False, kind="stable")
        g = kw.groupby("name", sort=False).agg(
            flops=("flops", "sum"), bytes=("bytes", "sum"), kind=("kind", "first"), dtype=("dtype", "first"),
            op_name=("op_name", "first"), input_dims=("input_dims", "first"))
        out = summ.merge(g.reset_index(), on="name", how="left")
    else:
        out = summ.assign(flops=np.nan, bytes=np.nan, kind=None, dtype=None, op_name=None, input_dims=None)
    if modelled_only:
        out = out[out["kind"].notna()].reset_index(drop=True)
    _add_rates(out, out["total_ns"].to_numpy(), out["kind"].to_numpy(), out["dtype"].to_numpy(), pk)
    return out


def step_mfu(trace: Trace, *, peaks_: Peaks | None = None, dtype: str | None = None) -> pd.DataFrame:
    """Model and hardware FLOPs utilisation per step (:func:`nbprof.analysis.steps.step_windows`).

    ``model_flops`` counts the matrix work (GEMM, convolution, attention: the FLOPs of the model's
    layers, forward and backward, as PaLM's MFU does, Chowdhery et al. 2022 App. B);
    ``hardware_flops`` counts every modelled op (elementwise, norms, optimizer too; recomputed
    activations count again because they execute again). Each event counts once (``counted``).

    Returns
    -------
    pandas.DataFrame
        One row per step: ``step``, ``step_ns`` (:func:`nbprof.analysis.steps.step_times`), ``model_flops``,
        ``hardware_flops`` (FLOP), ``dtype`` (the peak column: ``dtype`` if given, else the dtype of
        most matrix FLOPs), ``peak_tflops_per_s``, ``mfu`` (model_flops / (step_ns·1e-9 · peak)),
        ``hfu`` (hardware_flops / (step_ns·1e-9 · peak)). NaN ratios when the peaks are unknown; NaN FLOPs
        and ratios when no operator of the trace has a work model (recorded without ``record_shapes``:
        the work is unknown, not zero).
    """
    pk = peaks_ if peaks_ is not None else peaks(trace)
    win = step_windows(trace)
    cols = ["step", "step_ns", "model_flops", "hardware_flops", "dtype", "peak_tflops_per_s", "mfu", "hfu"]
    if not len(win):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    snum = win["step"].to_numpy(np.int64)
    sdur = (win["end_ns"] - win["start_ns"]).to_numpy(np.int64)
    w = op_work(trace)
    w = w[w["counted"].astype(bool)] if len(w) else w
    matrix = w["kind"].isin(["gemm", "conv", "attention"]) if len(w) else pd.Series(dtype=bool)
    if dtype is None:
        by_dt = w[matrix].groupby("dtype")["flops"].sum() if len(w) else pd.Series(dtype=float)
        dtype = str(by_dt.idxmax()) if len(by_dt) else "fp32"
    peak = pk.compute_peak(dtype, "gemm")
    mf = w[matrix].groupby("step")["flops"].sum() if len(w) else pd.Series(dtype=float)
    hf = w.groupby("step")["flops"].sum() if len(w) else pd.Series(dtype=float)
    out = pd.DataFrame({"step": snum.astype(np.int64), "step_ns": sdur.astype(np.int64)})
    out = out.groupby("step", as_index=False)["step_ns"].max()
    # no modelled op at all (recorded without record_shapes): the FLOPs are unknown, not zero
    fill = 0.0 if len(w) else np.nan
    out["model_flops"] = out["step"].map(mf).fillna(fill).astype(np.float64)
    out["hardware_flops"] = out["step"].map(hf).fillna(fill).astype(np.float64)
    out["dtype"] = dtype
    out["peak_tflops_per_s"] = peak / 1e12
    secs = out["step_ns"].to_numpy(dtype=np.float64) * 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        out["mfu"] = out["model_flops"].to_numpy() / (secs * peak)
        out["hfu"] = out["hardware_flops"].to_numpy() / (secs * peak)
    return out[cols]
