"""Collect PaddleCraft's measured figures into one Markdown page, ``docs/results.md``.

Sources, each written by the command that measures its figures:

- ``docs/results.json``: arena, data and benchmark figures first reported in the README, one
  entry each ``{section, metric, value, command, cpu, date[, note]}``; and its ``ablations``, one
  row per setting measured against the default ``{setting, source, seeds, metric, value,
  default, verdict, last_commit, command, cpu, date[, section, note]}``: self-play's removed
  settings (no ``section``), and a row with ``section`` (``referential``) in that arena's group;
- ``bench/results.json`` (``python bench/run.py``) and ``bench/results_selfplay.json``
  (``python bench/selfplay_bench.py``): the latest benchmark run, with its machine;
- ``agents/zoo/*/quality.json`` (``python scripts/build_zoo.py``): each zoo entry's quality.

Each section of the page is wrapped in snippet markers (``<!-- --8<-- [start:gan] -->``), so a
guide page shows its own table with ``--8<-- "results.md:gan"`` and the figures live in one
place. Usage::

    python scripts/results_table.py            # rewrite docs/results.md
    python scripts/results_table.py --check    # exit 1 if docs/results.md is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "results.md"

#: section key -> (title, one line on where the figures come from)
SECTIONS: dict[str, tuple[str, str]] = {
    "classify": ("Classify", "Image classification on digits and MNIST, fine-tuning, own arenas."),
    "gan": ("GAN", "Final evaluation of `arena=gan` / `arena=gan_conditional` (seed 0)."),
    "caption": ("Caption chains", "Test split of the captioned shapes, seed 0."),
    "selfplay": ("Self-play", "Final evaluation, seats alternating, greedy policy unless noted."),
    "connect_four_targets": (
        "Connect Four targets, 3 seeds (the PPO recipe)",
        "`python scripts/selfplay_targets.py --game connect_four_ppo` trains "
        "`arena=selfplay game=connect_four_ppo seed=S`, "
        "S = 0, 1, 2, and prints each seed's final evaluation.",
    ),
    "connect_four_solver": (
        "Connect Four judged by the perfect solver, 3 seeds",
        "`python scripts/selfplay_targets.py` (extra `solver`) judges each seed's trained policy "
        "on 400 seeded positions from realistic play and in games as first player against it: "
        "the reference players, the PPO recipe (`--game connect_four_ppo`), each part of the "
        "AlphaZero default as measured when it joined, the measured trades, the default itself.",
    ),
    "connect_four_variants": (
        "Connect Four: search-phase variants",
        "One seed, all from the same PPO checkpoint (update 1,100); a standard error of about "
        "0.05 per figure, so these rank the variants only roughly.",
    ),
    "referential": (
        "Referential games",
        "Speaker and listener invent a language (`arena=referential*`): the shipped configs' "
        "figures; per seed, 1 thread per run.",
    ),
    "referential_egg": (
        "Referential games: EGG's compo_vs_generalization",
        "`+experiment=egg_compo`: EGG's split of the attribute world at three of its grids, "
        "on a CPU budget (6000 steps of batch 32).",
    ),
    "referential_earlier": (
        "Referential games: earlier defaults",
        "The attribute world's figures before its vocabulary became 64 symbols, the shapes game "
        "before its two levers, and what the channel and the world's size did then.",
    ),
    "marl": (
        "Agents acting together (arena=marl)",
        "Mean episode return summed over agents on mpe2 tasks, greedy evaluation, one seed.",
    ),
    "data": ("Your own data", "Loaders over files against the bundled loaders and a peer."),
    "benchmarks": (
        "Benchmarks",
        "Speed figures are ratios against a peer measured in the same run.",
    ),
    "gan_probe": ("Why the GAN arena trails PyTorch", "`python bench/gan_probe.py` (~30 s)."),
    "clip": (
        "Image and language: CLIP towers",
        "Tiny randomly initialised transformers CLIPModel and CLIP BPE files written offline; "
        "seed case 7.",
    ),
    "contrastive": (
        "Image and language: contrastive towers",
        "`arena=contrastive`: an image agent and a text agent learn one space (seed 0).",
    ),
    "export": ("Export", "Exported models checked against the eager forward."),
    "names": ("Names API", "The seed's five cases as assertions."),
    "live": (
        "Live runs and online learning",
        "Digits streamed into a `data=stream` run; `trainer.live=true` against the same run "
        "without it, and the status endpoint while the run trains (docs/live.md).",
    ),
    "testing": ("Testing", "Wall times of the test tiers and the smoke run (docs/testing.md)."),
}


def _cell(value: object) -> str:
    """One table cell: no pipes or newlines."""
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _section(key: str, title: str, about: str, body: list[str]) -> list[str]:
    return [
        f"## {title}",
        "",
        about,
        "",
        f"<!-- --8<-- [start:{key}] -->",
        *body,
        f"<!-- --8<-- [end:{key}] -->",
        "",
    ]


def _entries_table(entries: list[dict]) -> list[str]:
    rows = [
        [e["metric"], e["value"], e.get("note", ""), f"`{e['command']}`", e["cpu"], e["date"]]
        for e in entries
    ]
    return _table(["what", "value", "conditions", "command", "CPU", "date"], rows)


#: the ablation table's title and its one line on what a row is
ABLATIONS = (
    "Ablations: self-play settings measured and removed",
    "One row per setting that measured as not helping and was removed from the code: where the "
    "idea comes from, the seeds, its figure against the default's on the same seeds and machine "
    "kind, the verdict. `git checkout <last commit>` gives the code (and the lever entries of "
    "`docs/results.json`) that measured it; the command reproduces the row there.",
)


#: each group of ablation rows (a row's ``section``; none: self-play) -> its snippet key, title,
#: one line on what a row is, the provenance table's title and line, and the entries section
#: the tables follow on the page
ABLATION_GROUPS: dict[str, tuple[str, str, str, str, str, str]] = {
    "selfplay": (
        "ablations",
        *ABLATIONS,
        "Ablations: how each row was measured",
        "The command that printed each ablation row, on the code of its last commit.",
        "connect_four_solver",
    ),
    "referential": (
        "referential_ablations",
        "Referential games: settings measured against the default",
        "One row per setting of `arena=referential*` measured against the default on the same "
        "seeds: where the idea comes from, the seeds, its figure against the default's of its "
        "time, the verdict (kept as a trade a user chooses, or measured not helping). The "
        "settings are still in the code; the last commit is the one the row was checked at.",
        "Referential games: how each setting's row was measured",
        "The command that printed each row (it runs on the row's last commit), with its "
        "conditions.",
        "referential_earlier",
    ),
    "marl": (
        "marl_ablations",
        "Agents acting together: settings measured against the default",
        "One row per setting of `arena=marl` tried against the default towards a target it "
        "misses: where the idea comes from, the seeds, its figure against the default's at the "
        "same environment steps, the verdict. A row whose code is gone names the last commit "
        "that has it.",
        "Agents acting together: how each row was measured",
        "The command that printed each row, on the code of its last commit.",
        "marl",
    ),
}


def _ablation_groups(rows: list[dict]) -> dict[str, list[dict]]:
    """The ablation rows by group, in file order; an unknown group is an error."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        group = r.get("section", "selfplay")
        if group not in ABLATION_GROUPS:
            raise ValueError(
                f"docs/results.json ablation {r.get('setting')!r}: unknown section {group!r}; "
                "add it to ABLATION_GROUPS"
            )
        groups.setdefault(group, []).append(r)
    return groups


def _ablation_tables(rows: list[dict]) -> tuple[list[str], list[str]]:
    """The ablation rows as two tables: the verdicts, then each row's command, CPU and date
    (and its conditions, where a row of the group has a ``note``)."""
    need = {"setting", "source", "seeds", "metric", "value", "default", "verdict", "last_commit"}
    metrics = sorted({r.get("metric", "") for r in rows})
    verdicts, provenance = [], []
    for r in rows:
        missing = (need | {"command", "cpu", "date"}) - set(r)
        if missing:
            raise ValueError(
                f"docs/results.json ablation {r.get('setting')!r} lacks {sorted(missing)}"
            )
        n = metrics.index(r["metric"]) + 1
        seeds = ", ".join(str(s) for s in r["seeds"])
        setting = f"`{r['setting']}`"
        verdicts.append(
            [setting, r["source"], seeds, f"{r['value']} ({n})", r["default"], r["verdict"],
             f"`{r['last_commit']}`"]
        )  # fmt: skip
        provenance.append([setting, f"`{r['command']}`", r["cpu"], r["date"]])
    head = ["Each figure is the metric its number names, the setting's beside the default's:", ""]
    head += [f"{i + 1}. {m}" for i, m in enumerate(metrics)] + [""]
    header = ["setting", "idea from", "seeds", "figure", "default", "verdict", "last commit"]
    prov_header = ["setting", "command", "CPU", "date"]
    if any("note" in r for r in rows):
        prov_header.append("conditions")
        provenance = [p + [r.get("note", "")] for p, r in zip(provenance, rows, strict=True)]
    return head + _table(header, verdicts), _table(prov_header, provenance)


def _bench_table(res: dict, selfplay: dict | None) -> list[str]:
    """The latest ``bench/results.json`` (and the self-play bench) as rows."""
    m = res.get("machine", {})
    cpu, date = m.get("cpu", "?"), m.get("date", "?")
    s = res.get("sections", {})
    rows: list[list[object]] = []

    def add(what: str, value: str, cmd: str, c: str = cpu, d: str = date) -> None:
        rows.append([what, value, f"`{cmd}`", c, d])

    if "overhead" in s:
        o = s["overhead"]
        add(
            "toolkit overhead: engine vs hand-written Paddle loop (time ratio, target <= 1.05)",
            f"{o['ratio']:.3f}x",
            "python bench/run.py --only overhead",
        )
    if "flops" in s:
        f = s["flops"]
        add(
            "MLP training GFLOP/s with / without the CPU tuning (gain)",
            f"{f['tuned']['train_gflops']:.0f} / {f['paddle_default']['train_gflops']:.0f} "
            f"({f['tuning_gain']:.2f}x)",
            "python bench/run.py --only flops",
        )
    if "gan_vs_torch" in s:
        g = s["gan_vs_torch"]
        add(
            "GAN arena steps/s vs PyTorch DCGAN (target >= 1.0); vs plain Paddle",
            f"{g['ratio']:.2f}x; {g['toolkit_vs_hand_written_paddle']:.2f}x",
            "python bench/run.py --only gan_vs_torch",
        )
    if "decode" in s:
        add(
            "caption decoding, batched beam-4 vs one sentence at a time",
            f"{s['decode']['speedup']:.1f}x",
            "python bench/run.py --only decode",
        )
    if "selfplay_policy" in s:
        p = s["selfplay_policy"]
        add(
            "self-play collection vs PettingZoo loop (target >= 20x); training mix",
            f"{p['ratio']:.1f}x; {p['training_mix_ratio']:.1f}x",
            "python bench/run.py --only selfplay_policy",
        )
    if "selfplay_workers" in s:
        w = s["selfplay_workers"]["speedup"]
        add(
            "collection in 1 / 2 worker processes vs in-process (1024 games)",
            " / ".join(f"{w[k]:.2f}x" for k in sorted(w)),
            "python bench/run.py --only selfplay_workers",
        )
    if "peak_rss" in s:
        r = s["peak_rss"]
        add(
            "peak RSS of each default arena, 200 steps (MiB)",
            ", ".join(f"{k} {v['peak_rss_mib']:.0f}" for k, v in r.items() if isinstance(v, dict)),
            "python bench/run.py --only peak_rss",
        )
    if selfplay:
        sm = selfplay.get("machine", {})
        r = selfplay["random_moves_per_s"]
        a = selfplay["arena_connect_four"]
        c, d = sm.get("cpu", "?"), sm.get("date", "?")
        add(
            "random legal moves/s, 1,024 Connect Four games: vector env / bare arrays "
            "(vs PettingZoo one game at a time)",
            f"{r['vector_env_1024'] / 1e6:.1f} M / {r['core_arrays_1024'] / 1e6:.1f} M "
            f"({r['vector_env_vs_pettingzoo_x']:.0f}x)",
            "python bench/selfplay_bench.py",
            c,
            d,
        )
        add(
            "arena collection: learner positions/s; PPO update positions/s; s per update",
            f"{a['collect_positions_per_s'] / 1e3:.0f} k; "
            f"{a['update_positions_per_s'] / 1e3:.0f} k; {a['seconds_per_update']:.2f} s",
            "python bench/selfplay_bench.py",
            c,
            d,
        )
    return _table(["what", "value", "command", "CPU", "date"], rows)


def _zoo_table(zoo_dir: Path) -> list[str]:
    rows = []
    for q in sorted(zoo_dir.glob("*/quality.json")):
        z = json.loads(q.read_text())
        value = z["value"]
        rows.append(
            [
                f"`{q.parent.name}`",
                f"{z['metric']} {value:.4g}" if isinstance(value, float) else value,
                f"`{z['trained_by']}`",
                z.get("cpu", "?"),
                z.get("date", "?"),
            ]
        )
    return _table(
        ["entry", "quality (re-measured by tests/test_zoo.py)", "trained by", "CPU", "date"], rows
    )


def render(root: Path = ROOT) -> str:
    """The whole ``docs/results.md`` page as text."""
    data = json.loads((root / "docs" / "results.json").read_text())
    by_section: dict[str, list[dict]] = {}
    for e in data["entries"]:
        if e["section"] not in SECTIONS:
            raise ValueError(
                f"docs/results.json: unknown section {e['section']!r}; add it to SECTIONS"
            )
        missing = {"metric", "value", "command", "cpu", "date"} - set(e)
        if missing:
            raise ValueError(f"docs/results.json entry {e.get('metric')!r} lacks {sorted(missing)}")
        by_section.setdefault(e["section"], []).append(e)
    lines = [
        "# Results",
        "",
        "<!-- generated by `python scripts/results_table.py`; edit docs/results.json or rerun "
        "the measuring command, not this file -->",
        "",
        "Every figure PaddleCraft reports, with the command that measures it, the CPU it ran on and",
        "the date. All runs used 2 CPU cores. Figures from another CPU or another thread count differ",
        "in the last digits (float summation order), and a GAN's or a self-play run's trajectory",
        "follows them. Regenerate this page with `python scripts/results_table.py`.",
        "",
    ]
    groups = _ablation_groups(data.get("ablations", []))
    for key, (title, about) in SECTIONS.items():
        if key in by_section:
            lines += _section(key, title, about, _entries_table(by_section[key]))
        for group, (snippet, a_title, a_about, p_title, p_about, after) in ABLATION_GROUPS.items():
            if after == key and groups.get(group):
                verdicts, provenance = _ablation_tables(groups[group])
                lines += _section(snippet, a_title, a_about, verdicts)
                lines += _section(f"{snippet}_provenance", p_title, p_about, provenance)
    bench = root / "bench" / "results.json"
    if bench.is_file():
        sp = root / "bench" / "results_selfplay.json"
        lines += _section(
            "bench_latest",
            "Latest benchmark run",
            "`bench/results.json` and `bench/results_selfplay.json` as the last full run wrote them.",
            _bench_table(
                json.loads(bench.read_text()), json.loads(sp.read_text()) if sp.is_file() else None
            ),
        )
    lines += _section(
        "zoo",
        "Zoo",
        "Trained agents shipped in the package (`Agent.pretrained(name)`), from each "
        "entry's `quality.json`.",
        _zoo_table(root / "agents" / "zoo"),
    )
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/results.md is stale")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != text:
            print(
                "docs/results.md is out of date: run python scripts/results_table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
