"""Capture back ends: torch.profiler (``torch_profiler``), Nsight Systems (``nsys``), CUDA memory snapshots
(``memory_snapshot``), whole-script profiling (``script``) and the always-on step watch (``watch``, ``watch_log``,
``watch_callbacks``). torch is imported only when a capture starts."""
