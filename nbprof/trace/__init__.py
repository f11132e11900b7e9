"""nbprof's canonical trace model (tables in int64 ns + metadata + load report)."""

from .model import LoadIssue, LoadReport, Trace, TraceMeta
from . import schema

__all__ = ["Trace", "TraceMeta", "LoadReport", "LoadIssue", "schema"]
