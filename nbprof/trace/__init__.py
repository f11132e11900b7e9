"""nbprof's canonical trace model (tables in int64 ns + metadata + load report)."""

from . import schema
from .model import LoadIssue, LoadReport, Trace, TraceMeta

__all__ = ["Trace", "TraceMeta", "LoadReport", "LoadIssue", "schema"]
