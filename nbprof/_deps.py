"""Optional dependencies: one helper that imports a package or names the pip extra that installs it.

The core install (``pip install nbprof``) is numpy, pandas, msgspec, orjson and pyarrow: enough to load
every trace format and run every analysis (``nbprof summary``/``stats``/``check``). Everything else is an
extra, named for what it enables (see ``[project.optional-dependencies]`` in pyproject.toml):

=========== =========================================================================
extra      enables
=========== =========================================================================
viz        the live and static viewers (``nbprof.viz``): bokeh, ipywidgets, jupyter_bokeh
notebook   the magics and the rich result displays: ipython, ipykernel, itables
report     ``nbprof report`` (papermill, nbconvert, nbformat) plus ``viz`` and ``notebook``
tensorboard TensorBoard launch and scalar export (``nbprof.tensorboard``)
deepspeed  running DeepSpeed jobs (``nbprof.deepspeed.run``)
dask       ``load_ranks(client=...)`` on a Dask cluster
sql        ``Trace.sql`` (duckdb)
perfetto   ``Trace.to_perfetto`` (perfetto)
torch      profiling (``nbprof.profile``, ``%%torchprof``)
=========== =========================================================================
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependencyError

__all__ = ["EXTRAS", "require", "missing"]

#: top-level module -> the extra that installs it
EXTRAS: dict[str, str] = {
    "bokeh": "viz",
    "ipywidgets": "viz",
    "jupyter_bokeh": "viz",
    "IPython": "notebook",
    "ipykernel": "notebook",
    "itables": "notebook",
    "papermill": "report",
    "nbconvert": "report",
    "nbformat": "report",
    "tensorboard": "tensorboard",
    "deepspeed": "deepspeed",
    "dask": "dask",
    "distributed": "dask",
    "duckdb": "sql",
    "perfetto": "perfetto",
    "torch": "torch",
    "tqdm": "notebook",
    "psutil": "dask",
}


def missing(module: str, extra: str | None = None, feature: str | None = None,
            cause: BaseException | None = None) -> MissingDependencyError:
    """The :class:`~nbprof.errors.MissingDependencyError` for ``module`` (not raised: the caller raises it).

    The message is ``"<feature> needs <module>, which is not installed in this environment (<cause>); hint: pip
    install 'nbprof[<extra>]'"``; ``.name`` is the top-level module name. ``extra`` defaults to :data:`EXTRAS`.
    """
    top = module.split(".")[0]
    extra = extra or EXTRAS.get(top, "all")
    what = feature or f"this feature of nbprof ({top})"
    detail = f" ({cause})" if cause is not None and str(cause) else ""
    msg = (f"{what} needs {top}, which is not installed in this environment{detail}; "
           f"hint: pip install 'nbprof[{extra}]'")
    return MissingDependencyError(msg, name=top)


def require(module: str, extra: str | None = None, feature: str | None = None) -> ModuleType:
    """Import ``module`` (dotted names allowed) and return it.

    Parameters
    ----------
    module : str
        E.g. ``"bokeh.plotting"``.
    extra : str, optional
        The pip extra that installs it (default from :data:`EXTRAS` by the top-level name).
    feature : str, optional
        What needs it, for the message (``"nbprof.viz"``).

    Raises
    ------
    MissingDependencyError
        (also an ``ImportError``) naming ``pip install 'nbprof[<extra>]'`` when ``module`` or one of its own
        dependencies cannot be imported. Import errors inside nbprof itself propagate unchanged.

    Examples
    --------
    >>> require("json").__name__
    'json'
    >>> try:
    ...     require("no_such_pkg_for_nbprof", "viz", "the viewers")
    ... except ImportError as err:
    ...     print(str(err).split("; ")[-1], err.name)
    hint: pip install 'nbprof[viz]' no_such_pkg_for_nbprof
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if isinstance(exc, MissingDependencyError) or (getattr(exc, "name", None) or "").split(".")[0] == "nbprof":
            raise
        name = getattr(exc, "name", None) or module
        raise missing(name, extra or EXTRAS.get(module.split(".")[0]), feature, exc) from exc
