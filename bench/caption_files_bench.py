"""The caption arena on files vs generated data: the shapes written out as PNG + JSONL.

  python bench/caption_files_bench.py [--n-train 2000] [--n-test 300] [--epochs 2]

Writes the captioned shapes of ``seed`` (the same images and captions ``task=shapes``
generates) as ``train.jsonl`` / ``test.jsonl`` + PNGs, then trains the default chain
(captioner + listener) twice for the same budget: ``data=captions`` (decoded lazily by
loader workers) and the built-in ``task=shapes`` (in memory). Prints one JSON line per
run: captioner BLEU-4, listener recall@1, chain accuracy (chance 1/4) and wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_shapes(root: Path, seed: int, n_train: int, n_test: int) -> tuple[Path, Path]:
    """``root/{train,test}.jsonl`` and ``root/img/*.png``: the shapes of ``seed``."""
    import cv2

    from paddlecraft.craftdata.shapes import load_shapes

    d = load_shapes(seed, n_train=n_train, n_test=n_test, n_compositional=0)
    (root / "img").mkdir(parents=True, exist_ok=True)
    for name, split in (("train", d.train), ("test", d.test)):
        lines = []
        for i, (img, cap) in enumerate(zip(split.images, split.captions)):
            rel = f"img/{name}_{i:05d}.png"
            cv2.imwrite(str(root / rel), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
            lines.append(json.dumps({"image": rel, "caption": cap}))
        (root / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
    return root / "train.jsonl", root / "test.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--n-test", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--captioner-steps", type=int, default=100)
    ap.add_argument("--listener-steps", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning

    apply_cpu_tuning()
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import run_from_config

    register_configs()
    budget = [
        f"seed={args.seed}", f"arena.epochs={args.epochs}", "trainer.progress=false",
        f"arena.hops.captioner.steps={args.captioner_steps}",
        f"arena.hops.listener.steps={args.listener_steps}", f"arena.data.n_test={args.n_test}",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        train, test = write_shapes(Path(tmp) / "shapes", args.seed, args.n_train, args.n_test)
        runs = {
            "data=captions": [
                "data=captions",
                f"data.path={train}",
                f"data.test_path={test}",
                f"data.workers={args.workers}",
            ],  # fmt: skip
            "task=shapes": [f"arena.data.n_train={args.n_train}", "arena.data.n_compositional=0"],
        }
        for name, extra in runs.items():
            with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
                cfg = compose("config", overrides=["arena=caption", *budget, *extra])
            run = Path(tmp) / name.replace("=", "_")
            t0 = time.perf_counter()
            run_from_config(cfg, run)
            m = json.loads((run / "results.json").read_text())["metrics"]
            row = {
                "run": name,
                "captioner_bleu4": round(m["captioner_bleu4"], 4),
                "listener_recall_at_1": round(m["listener_recall_at_1"], 4),
                "chain_accuracy": round(m["chain_accuracy"], 4),
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
