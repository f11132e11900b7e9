"""nbprof.capture.step_hooks on real torch: optimizer post-hook steps, the DataLoader fallback, data wait."""

from __future__ import annotations

import itertools
import time

import pytest

torch = pytest.importorskip("torch")

from nbprof.capture.step_hooks import StepEnd, StepHooks  # noqa: E402


class _SlowDataset(torch.utils.data.Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)
        return torch.randn(4), torch.randn(1)


def _train(loader, opts, model):
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for o in opts:
            o.step()
            o.zero_grad()


def test_optimizer_steps_and_data_wait():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(_SlowDataset(12, 0.002), batch_size=2)  # 6 batches, 4 ms fetch each
    got: list[StepEnd] = []
    with StepHooks(got.append) as h:
        _train(loader, [opt], model)
    assert [e.index for e in got] == list(range(6)) and h.steps == 6
    assert {e.source for e in got} == {"optimizer"}
    for a, b in itertools.pairwise(got):
        assert b.start_ns == a.end_ns  # contiguous
    # every step holds one batch fetch of 2 x 2 ms sleeps
    assert all(e.data_wait_ns >= 4_000_000 for e in got)
    assert all(e.data_wait_ns <= e.duration_ns for e in got)
    # removed afterwards: no more steps, DataLoader unpatched
    _train(loader, [opt], model)
    assert h.steps == 6
    from torch.utils.data import dataloader

    assert dataloader._BaseDataLoaderIter.__next__.__name__ == "__next__"
    assert dataloader._BaseDataLoaderIter.__next__.__module__ == "torch.utils.data.dataloader"


def test_two_optimizers_one_step_per_iteration():
    m1, m2 = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
    o1, o2 = torch.optim.SGD(m1.parameters(), lr=0.01), torch.optim.Adam(m2.parameters())
    got: list[StepEnd] = []
    with StepHooks(got.append):
        for _ in range(5):
            for m, o in ((m1, o1), (m2, o2)):
                m(torch.randn(2, 4)).sum().backward()
                o.step()
    # the first iteration ends at o1 (nothing learned yet); from the second cycle on, at o2
    assert len(got) == 5


def test_dataloader_fallback_without_optimizer():
    model = torch.nn.Linear(4, 1)
    loader = torch.utils.data.DataLoader(_SlowDataset(8, 0.001), batch_size=2)  # 4 batches
    got: list[StepEnd] = []
    with StepHooks(got.append), torch.no_grad():
        for _epoch in range(2):
            for x, _y in loader:
                model(x)
    assert len(got) == 8 and {e.source for e in got} == {"dataloader"}
    assert all(e.data_wait_ns >= 2_000_000 for e in got)


def test_failing_callback_and_raising_body_leave_no_hook():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def bad(ev: StepEnd) -> None:
        raise ValueError(f"boom {ev.index}")

    with pytest.raises(KeyError), StepHooks(bad) as h:
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()  # the callback raises inside: the loop goes on
        raise KeyError("user")
    assert h.steps == 3 and h.error_count == 3 and h.errors[0] == "ValueError: boom 0"
    from torch.optim.optimizer import _global_optimizer_post_hooks

    assert not _global_optimizer_post_hooks


def test_nested_instances_count_independently():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with StepHooks() as outer:
        opt.step()
        with StepHooks() as inner:
            opt.step()
            opt.step()
        opt.step()
    assert (outer.steps, inner.steps) == (4, 2)
    with pytest.raises(RuntimeError), outer, outer:
        pass


def test_data_wait_cpu_time_separates_waiting_from_loading():
    """A single-process loader that computes its batch spends its wait on the CPU; one that sleeps does not."""

    class _Busy(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int):
            t = time.thread_time_ns()
            while time.thread_time_ns() - t < 5_000_000:  # 5 ms of CPU
                pass
            return torch.randn(4)

    got: list[StepEnd] = []
    with StepHooks(got.append):
        for _ in torch.utils.data.DataLoader(_Busy(), batch_size=None):
            pass
    busy = got[-1]
    assert busy.data_wait_cpu_ns >= 4_000_000 and busy.data_wait_cpu_ns <= busy.data_wait_ns + 1_000_000
    got.clear()
    with StepHooks(got.append):
        for _ in torch.utils.data.DataLoader(_SlowDataset(4, 0.01), batch_size=None):
            pass
    assert got[-1].data_wait_ns >= 10_000_000 and got[-1].data_wait_cpu_ns < 0.5 * got[-1].data_wait_ns
