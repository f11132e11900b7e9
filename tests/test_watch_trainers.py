"""The step watch's trainer callbacks on real packages and tiny models on CPU: Hugging Face Trainer, Lightning."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from nbprof.capture.watch_callbacks import hf_callback, lightning_callback  # noqa: E402
from nbprof.sources.watch_run import read_run  # noqa: E402


def test_hf_trainer_callback(tmp_path):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=16, num_labels=2)
    model = transformers.BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 64, (8,), generator=g), "labels": torch.tensor(i % 2)} for i in range(40)]
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=9, per_device_train_batch_size=4,
                                          gradient_accumulation_steps=2, report_to=[], use_cpu=True,
                                          save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                          dataloader_num_workers=0)
    cb = hf_callback(tmp_path / "run", capture_steps=0)
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[cb]).train()
    assert cb.session.watch is None and cb.last is not None
    run = read_run(tmp_path / "run")
    df = run.steps
    assert len(df) == 9  # one row per optimizer update (max_steps), two micro-batches each
    assert (df["forward_ns"] > 0).all() and (df["backward_ns"] > 0).all() and (df["optimizer_ns"] > 0).all()
    assert (df["data_wait_ns"] > 0).all()
    assert (df["errors"] == "").all()
    assert run.summary["status"] == "finished"


def test_lightning_callback(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 2)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.lin(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    ds = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    cb = lightning_callback(tmp_path / "run", capture_steps=0)
    trainer = pl.Trainer(max_steps=10, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[cb])
    trainer.fit(Tiny(), torch.utils.data.DataLoader(ds, batch_size=4))
    df = read_run(tmp_path / "run").steps
    assert len(df) == 10
    assert (df["forward_ns"] > 0).all() and (df["optimizer_ns"] > 0).all() and (df["data_wait_ns"] > 0).all()
    assert (df["errors"] == "").all()
