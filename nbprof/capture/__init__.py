"""Capture back ends: torch.profiler (``torch_profiler``), Nsight Systems (``nsys``), CUDA memory snapshots
(``memory_snapshot``) and whole-script profiling (``script``). torch is imported only when a capture starts."""
