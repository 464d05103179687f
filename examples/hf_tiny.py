"""A tiny Hugging Face ``Trainer`` run recorded by ``TrackerCallback`` (CPU, seconds).

    python examples/hf_tiny.py
    python examples/hf_tiny.py --mlflow     # the same run with report_to="mlflow" instead

The model is a two-layer BERT built from a ``BertConfig`` (no download) and trained on random
token sequences whose label is whether token 1 occurs more often than token 2. The trainer's
arguments and the model config become the run's config; ``loss``, ``learning_rate``,
``grad_norm`` and the evaluation metrics (``eval_loss``, ``eval_accuracy``) are logged at the
global step, and every ``checkpoint-<step>/`` folder is recorded with its digest. A retried
queued job resumes from the last verified checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the network

import numpy as np
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from tracker.integrations.transformers import TrackerCallback

VOCAB = 32
LENGTH = 16


class RandomTokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, VOCAB, (n, LENGTH), generator=g)
        self.ids[:, : LENGTH // 2] = torch.randint(1, 3, (n, LENGTH // 2), generator=g)
        self.labels = ((self.ids == 1).sum(1) > (self.ids == 2).sum(1)).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def accuracy(prediction: Any) -> dict[str, float]:
    logits, labels = prediction
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=float, default=2)
    parser.add_argument("--output-dir", default="hf-out")
    parser.add_argument("--project", default="hf-tiny")
    parser.add_argument("--mlflow", action="store_true", help='report_to="mlflow" instead')
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=LENGTH, num_labels=2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    training = TrainingArguments(
        output_dir=args.output_dir,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=1e-3,
        logging_steps=2,
        eval_strategy="epoch",
        save_strategy="epoch",
        report_to=["mlflow"] if args.mlflow else "none",
        use_cpu=True,
        seed=0,
        data_seed=0,
        disable_tqdm=True,
    )
    callback = None if args.mlflow else TrackerCallback(project=args.project)
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=RandomTokens(64, seed=0),
        eval_dataset=RandomTokens(32, seed=1),
        compute_metrics=accuracy,
        callbacks=[callback] if callback is not None else None,
    )
    resume = callback.resume_checkpoint() if callback is not None else None
    trainer.train(resume_from_checkpoint=resume)
    if callback is not None and callback.run is not None:
        print(f"run {callback.run.id}: resumed from {resume}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
