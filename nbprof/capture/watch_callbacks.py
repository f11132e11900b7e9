"""Thin trainer adapters for the step watch: a Hugging Face ``Trainer`` callback and a Lightning callback.

Both open a :class:`nbprof.capture.watch.Watch` when training starts, mark a step at the end of each
trainer step (``TrainerCallback.on_step_end``: one optimizer update, gradient accumulation included;
Lightning ``Callback.on_train_batch_end``), and close the watch (writing the run folder) when training ends.
The trainers' own step definition wins over the watch's optimizer/DataLoader boundaries. ``transformers``
and ``lightning`` are optional (``pip install 'nbprof[trainers]'``); each is imported only by its factory.

::

    trainer = transformers.Trainer(..., callbacks=[hf_callback("runs/hf")])
    trainer = lightning.Trainer(..., callbacks=[lightning_callback("runs/pl")])
"""

from __future__ import annotations

import os
from typing import Any

from .watch import Watch

__all__ = ["hf_callback", "lightning_callback"]


class _Session:
    """The watch of one training run: opened on start, stepped, closed on end (also on a second start)."""

    def __init__(self, run_dir: str | os.PathLike[str], kwargs: dict[str, Any]) -> None:
        self.run_dir, self.kwargs = run_dir, kwargs
        self.watch: Watch | None = None

    def begin(self) -> None:
        self.end()
        self.watch = Watch(self.run_dir, manual=True, **self.kwargs)
        self.watch.__enter__()

    def step(self) -> None:
        if self.watch is not None:
            self.watch.step()

    def end(self) -> None:
        if self.watch is not None:
            w, self.watch = self.watch, None
            w.__exit__(None, None, None)


def hf_callback(run_dir: str | os.PathLike[str], **kwargs: Any) -> Any:
    """A ``transformers.TrainerCallback`` that watches the training run into ``run_dir``.

    ``kwargs`` go to :class:`~nbprof.capture.watch.Watch`. The callback's ``watch`` attribute is the running
    (or last) watch; ``session.watch`` is None after training ends, ``last`` keeps the finished one.

    Raises
    ------
    MissingDependencyError
        When transformers is not installed.
    """
    try:
        from transformers import TrainerCallback
    except ImportError as exc:
        from .._deps import missing

        raise missing("transformers", "trainers", "the Hugging Face Trainer callback of nbprof.watch", exc) from exc

    class NbprofWatchCallback(TrainerCallback):
        """Opens the step watch on ``on_train_begin``, marks each ``on_step_end``, closes on ``on_train_end``."""

        def __init__(self) -> None:
            self.session = _Session(run_dir, kwargs)
            self.last: Watch | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.session.begin()
            self.last = self.session.watch

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.session.step()

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.session.end()

    return NbprofWatchCallback()


def lightning_callback(run_dir: str | os.PathLike[str], **kwargs: Any) -> Any:
    """A ``lightning.pytorch.Callback`` that watches the fit into ``run_dir`` (``kwargs`` go to
    :class:`~nbprof.capture.watch.Watch`); ``last`` is the finished watch.

    Raises
    ------
    MissingDependencyError
        When lightning is not installed.
    """
    try:
        from lightning.pytorch import Callback
    except ImportError as exc:
        from .._deps import missing

        raise missing("lightning", "trainers", "the Lightning callback of nbprof.watch", exc) from exc

    class NbprofWatchCallback(Callback):
        """Opens the step watch on ``on_train_start``, marks each ``on_train_batch_end``, closes on
        ``on_train_end`` (and on an exception, ``on_exception``)."""

        def __init__(self) -> None:
            self.session = _Session(run_dir, kwargs)
            self.last: Watch | None = None

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            self.session.begin()
            self.last = self.session.watch

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            self.session.step()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.session.end()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.session.end()

    return NbprofWatchCallback()
