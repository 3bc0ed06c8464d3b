"""Fine-tuning with PaddleCraft's encoders: pretrain, save, reload under a new head, compare.

A ResNet-18 (base width 16, small-image stem) learns digits 0-4 (task A). Its weights are
saved with ``encoder.save_pretrained`` and loaded with ``pretrained_strict=false`` into a
classifier for digits 5-9 (task B, 20 training images per class): the backbone loads, the new head
stays initialised. The same classifier is also trained from scratch. Both are evaluated on
task B's test images every 10 steps; the script prints the steps each needs to reach the
target accuracy and writes ``finetune_curves.png``.

    python examples/finetune.py [--out runs/finetune] [--target 0.85] [--per-class 20]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning  # noqa: E402

apply_cpu_tuning()

import numpy as np  # noqa: E402

from paddlecraft.agents import Classifier  # noqa: E402
from paddlecraft.arenas.engine.plots import line_chart, save  # noqa: E402
from paddlecraft.craftdata import iterate_minibatches, load_digits  # noqa: E402


def resnet(num_classes: int, pretrained: str | None = None) -> dict:
    """The encoder config both tasks use (optionally loading a backbone)."""
    return {
        "_target_": "paddlecraft.encoders.ResNetEncoder",
        "depth": 18,
        "width": 16,
        "in_channels": 1,
        "small_input": True,
        "num_classes": num_classes,
        "pretrained": pretrained,
        "pretrained_strict": False,
    }


def subset(x: np.ndarray, y: np.ndarray, classes: range, per_class: int | None = None):
    """Images of ``classes`` relabelled 0..k-1 (the first ``per_class`` of each)."""
    keep = np.concatenate(
        [np.flatnonzero(y == c)[:per_class] for c in classes]  # deterministic: split order
    )
    keep.sort()
    return x[keep], (y[keep] - classes.start).astype(np.int64)


def train(agent: Classifier, x, y, steps: int, test, every: int = 10, seed: int = 0):
    """Adam steps on (x, y); returns [(step, test accuracy)] every ``every`` steps."""
    curve = [(0, float((agent.predict(test[0]) == test[1]).mean()))]
    rng, done = np.random.default_rng(seed), 0
    while done < steps:
        for xb, yb in iterate_minibatches(x, y, 32, rng):
            agent.train()
            agent.update(agent.loss(agent.to_tensor(xb), agent.to_tensor(yb)))
            done += 1
            if done % every == 0:
                curve.append((done, float((agent.predict(test[0]) == test[1]).mean())))
            if done >= steps:
                break
    return curve


def steps_to(curve: list[tuple[int, float]], target: float) -> int | None:
    """The first evaluated step at which accuracy reaches ``target`` (None: never)."""
    return next((s for s, a in curve if a >= target), None)


def plot(curves: dict[str, list[tuple[int, float]]], target: float, path: Path) -> None:
    """Both accuracy curves (a matplotlib chart), the target as a dashed line."""
    labels = {"finetuned": "fine-tuned (task A backbone)", "scratch": "from scratch"}
    chart = line_chart(
        {labels.get(name, name): curve for name, curve in curves.items()},
        title="test accuracy, digits 5-9",
        xlabel="step",
        ylabel="test accuracy",
        hlines={f"target {target:.2f}": target},
        ylim=(0.0, 1.0),
        size=(800, 450),
    )
    save(chart, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/finetune")
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--per-class", type=int, default=20)
    parser.add_argument("--pretrain-steps", type=int, default=300)
    parser.add_argument("--steps", type=int, default=150)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    data = load_digits(seed=0)
    a_train = subset(data.train.x, data.train.y, range(0, 5))
    a_test = subset(data.test.x, data.test.y, range(0, 5))
    b_train = subset(data.train.x, data.train.y, range(5, 10), per_class=args.per_class)
    b_test = subset(data.test.x, data.test.y, range(5, 10))

    teacher = Classifier("task_a", encoder=resnet(5), lr=1e-3, seed=0)
    curve_a = train(teacher, *a_train, args.pretrain_steps, a_test, every=50)
    backbone = out / "task_a_resnet.safetensors"
    teacher.encoder.save_pretrained(backbone)

    tuned = Classifier("finetuned", encoder=resnet(5, str(backbone)), lr=1e-3, seed=1)
    scratch = Classifier("scratch", encoder=resnet(5), lr=1e-3, seed=1)
    curves = {
        "finetuned": train(tuned, *b_train, args.steps, b_test),
        "scratch": train(scratch, *b_train, args.steps, b_test),
    }
    plot(curves, args.target, out / "finetune_curves.png")
    result = {
        "task_a_test_accuracy": curve_a[-1][1],
        "task_b_train_images": len(b_train[1]),
        "target": args.target,
        **{f"{k}_steps_to_target": steps_to(c, args.target) for k, c in curves.items()},
        **{f"{k}_final_accuracy": c[-1][1] for k, c in curves.items()},
        "curves": curves,
        "plot": str(out / "finetune_curves.png"),
    }
    (out / "finetune.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "curves"}, indent=1))


if __name__ == "__main__":
    main()
