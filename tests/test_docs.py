"""The documentation: the README is a landing page, the MkDocs site builds with --strict, the
API reference finds the namespaced modules, and docs/results.md matches its sources."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _results_table():
    spec = importlib.util.spec_from_file_location(
        "results_table", ROOT / "scripts" / "results_table.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_is_a_landing_page_with_the_two_commands_and_working_links():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    long = [i + 1 for i, line in enumerate(text.splitlines()) if len(line) > 200]
    assert long == [], f"README lines over 200 characters: {long}"
    assert "bash scripts/run.sh arena=classify" in text
    assert "bash scripts/test.sh" in text
    assert "pip install paddlecraft" in text
    for folder in ("agents/", "encoders/", "arenas/", "conf/", "tests/", "run.py", "README.md"):
        assert folder in text, folder
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert missing == []


def test_site_home_page_is_the_readme():
    """docs/index.md is the README with its links relative to docs/ (regenerate it with
    ``sed 's#](docs/#](#g' README.md > docs/index.md``)."""
    readme = (ROOT / "README.md").read_text().replace("](docs/", "](")
    assert (ROOT / "docs" / "index.md").read_text() == readme


def test_readme_arena_table_is_one_sentence_and_one_linked_figure_per_arena():
    """Each arena row: its guide, a command, what it does, a figure linked to the results page
    (an anchor that page has); the place for the next arenas' rows is marked."""
    text = (ROOT / "README.md").read_text()
    part = text.split("## Arenas", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in part.splitlines() if line.startswith("| [")]
    assert len(rows) >= 6
    results = (ROOT / "docs" / "results.md").read_text()
    slugs = {
        re.sub(r"[^\w\s-]", "", h.lower()).strip().replace(" ", "-")
        for h in re.findall(r"^## (.+)$", results, re.M)
    }
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4, row
        assert cells[1].startswith("`python run.py arena="), row
        anchor = re.fullmatch(r"\[[^\]]+\]\(docs/results\.md#([\w-]+)\)(?: .*)?", cells[3])
        assert anchor and anchor.group(1) in slugs, row
    for arena in ("marl", "contrastive"):  # the round-5 arenas have their rows
        assert f"`python run.py arena={arena}" in part, arena


#: what belongs in docs/results.json only: a date (not a log's clock time), a CPU model, a
#: measurement's run folder (a seed's folder, runs/<name>_s0, runs/<name>_s*, runs/<x>/seed0)
_RESULTS_ONLY = re.compile(
    r"20\d\d-\d\d-\d\d(?![ _T]\d)|EPYC|Xeon|runs/[\w.-]+_s[\d*{]|runs/[\w.-]+/seed\d"
)


def test_no_dates_cpu_models_or_run_folders_outside_the_results():
    """README and guides say what to run and why; when and where it ran is results data."""
    assert _RESULTS_ONLY.findall("on 2026-12-04, AMD EPYC, runs/t9_s0 and runs/x/seed1") == [
        "2026-12-04",
        "EPYC",
        "runs/t9_s0",
        "runs/x/seed1",
    ]
    assert _RESULTS_ONLY.findall("started 2026-11-23 21:02:11; runs/classify/<time>/") == []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = {
        f"{p.relative_to(ROOT)}:{i + 1}": hits
        for p in pages
        if p != ROOT / "docs" / "results.md"  # generated from docs/results.json
        for i, line in enumerate(p.read_text().splitlines())
        if (hits := _RESULTS_ONLY.findall(line))
    }
    assert found == {}


def test_no_dates_cpu_models_or_run_folders_in_config_comments():
    """A config's comments say what a setting does, not when or where it was measured."""
    found = [
        f"{path.relative_to(ROOT)}:{i}"
        for path in sorted((ROOT / "conf").rglob("*.yaml"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if "#" in line and _RESULTS_ONLY.search(line.split("#", 1)[1])
    ]
    assert found == []


def test_every_ablation_row_names_its_source_seeds_figure_verdict_and_commit():
    """One row per removed self-play setting, each reproducible from the commit it names."""
    rows = json.loads((ROOT / "docs" / "results.json").read_text())["ablations"]
    settings = [r["setting"] for r in rows if "section" not in r]  # self-play's removed ones
    assert len(settings) == len(set(settings)) == 38
    assert all(s.split(".")[0] in ("agents", "arena") for s in settings), settings
    for r in rows:
        for key in ("source", "metric", "value", "default", "verdict", "command", "cpu"):
            assert isinstance(r[key], str) and r[key].strip(), (r["setting"], key)
        assert r["seeds"] and all(isinstance(s, int) and s >= 0 for s in r["seeds"]), r
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["date"]), r
        assert re.fullmatch(r"[0-9a-f]{7,40}", r["last_commit"]), r
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    if shallow.returncode == 0 and shallow.stdout.strip() == "false":  # full history at hand
        for commit in {r["last_commit"] for r in rows}:
            ok = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT)
            assert ok.returncode == 0, f"{commit} is not a commit of this repository"
    # the self-play guide shows the table generated from these rows
    guide = (ROOT / "docs" / "guide" / "selfplay.md").read_text()
    assert '--8<-- "results.md:ablations"' in guide


def test_every_referential_setting_row_names_a_setting_of_the_composed_configs():
    """The referential games' ablation rows: settings still in the code (each composes in
    ``arena=referential`` or ``arena=referential_shapes``), a verdict that says kept or not
    helping, and the guide shows their table and the shipped configs' figures."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from paddlecraft.arenas import register_configs

    rows = [
        r
        for r in json.loads((ROOT / "docs" / "results.json").read_text())["ablations"]
        if r.get("section") == "referential"
    ]
    settings = [r["setting"] for r in rows]
    assert len(settings) == len(set(settings)) >= 8, settings
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfgs = [
            compose("config", overrides=[f"arena={a}"])
            for a in ("referential", "referential_shapes")
        ]
    GlobalHydra.instance().clear()
    for r in rows:
        for key in r["setting"].split(", "):
            found = [OmegaConf.select(c, key, default="<missing>") for c in cfgs]
            assert any(v != "<missing>" for v in found), (key, "not in the composed configs")
        assert r["verdict"].startswith(("kept", "measured not helping")), r["setting"]
        assert r["note"].strip(), r["setting"]  # per-seed figures and conditions
    guide = (ROOT / "docs" / "guide" / "referential.md").read_text()
    for snippet in ("referential", "referential_ablations", "referential_egg"):
        assert f'--8<-- "results.md:{snippet}"' in guide, snippet


def test_readme_python_example_runs():
    """The landing page's Python block runs as written (in-process; nothing downloaded)."""

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    ns: dict = {}
    try:
        exec(compile(blocks[0], "README.md", "exec"), ns)
        assert [p.name for p in ns["params"]["hidden_layer_1"]] == [
            "model1.hidden_layer_1.w_0",
            "model1.hidden_layer_1.b_0",
        ]
        assert type(ns["clf"]).__name__ == "Classifier"
    finally:
        ns.clear()


def test_results_page_is_generated_from_its_sources():
    """docs/results.md is what scripts/results_table.py renders now (rerun it after measuring)."""
    stale = (ROOT / "docs" / "results.md").read_text() != _results_table().render(ROOT)
    assert not stale, "docs/results.md is out of date: run python scripts/results_table.py"


def test_every_results_entry_names_its_command_cpu_and_date():
    entries = json.loads((ROOT / "docs" / "results.json").read_text())["entries"]
    sections = _results_table().SECTIONS
    for e in entries:
        assert e["section"] in sections, e
        assert e["command"].strip() and e["cpu"].strip(), e
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", e["date"]), e
    # the headline figures the README reports are in the results table
    page = (ROOT / "docs" / "results.md").read_text()
    for figure in ("0.975", "0.9934", "12.95", "99.1 %", "0.976", "0.925", "0.908", "0.932"):
        assert figure in page, figure


def test_api_reference_lists_every_public_encoder():
    """paddlecraft.encoders imports lazily (nothing for static analysis to see), so its page
    names each export where it is defined; a new export must be added there."""
    src = (ROOT / "encoders" / "__init__.py").read_text()
    exports = next(
        ast.literal_eval(node.value)
        for node in ast.walk(ast.parse(src))
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_EXPORTS"
    )
    page = (ROOT / "docs" / "api" / "encoders.md").read_text()
    missing = [
        n for n, mod in exports.items() if f"::: paddlecraft.encoders.{mod}.{n}\n" not in page
    ]
    assert missing == []


def test_mkdocs_build_strict(tmp_path):
    """The site builds with no broken link, missing snippet or unresolved API reference."""
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the namespace mapping reached mkdocstrings: paddlecraft.agents lives in <root>/agents
    agents_page = (site / "api" / "agents" / "index.html").read_text()
    assert 'id="paddlecraft.agents.update_together"' in agents_page
    assert 'id="paddlecraft.agents.Agent.step_gradients"' in agents_page
    # attribute doc comments (#:) reach the reference; no reST role shows as literal text
    engine_page = (site / "api" / "engine" / "index.html").read_text()
    assert 'id="paddlecraft.arenas.engine.Arena.headline_mode"' in engine_page
    assert "whether a larger headline is better" in engine_page
    for page in (site / "api").glob("*/index.html"):
        assert not re.search(r":(?:class|meth|func|mod|attr):", page.read_text()), page
    encoders_page = (site / "api" / "encoders" / "index.html").read_text()
    assert 'id="paddlecraft.encoders.image_mlp.ImageMLPEncoder"' in encoders_page
    # guide pages show their figures from the generated results page
    assert "12.95" in (site / "guide" / "gan" / "index.html").read_text()
    assert "0.9934" in (site / "guide" / "classify" / "index.html").read_text()


_TABLE_RULE = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")


def _headless_table_rows(text: str) -> list[int]:
    """Line numbers of table rows that start a table with no header rule under them
    (a blank line inside a table splits it, and Markdown shows the rest as text)."""
    lines = text.split("\n")
    return [
        i + 1
        for i in range(1, len(lines) - 1)
        if lines[i].startswith("|")
        and not lines[i - 1].startswith("|")
        and not _TABLE_RULE.match(lines[i + 1].strip())
    ]


def test_no_table_is_split_by_a_blank_line():
    """Every Markdown table in the README and the docs starts with its header and rule."""
    assert _headless_table_rows("| a |\n|---|\n| 1 |\n\n| 2 |\n") == [5]
    assert _headless_table_rows("text\n\n| a | b |\n| :-- | --: |\n| 1 | 2 |\n") == []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    split = {
        str(p.relative_to(ROOT)): rows
        for p in pages
        if (rows := _headless_table_rows(p.read_text()))
    }
    assert split == {}
