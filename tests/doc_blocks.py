"""What the documentation asks a reader to run: its code blocks and run commands, parsed.

Every page (``README.md``, ``docs/**/*.md``, new pages too) is read the same way:

- a fenced block is *marked* when the last non-blank line before it is
  ``<!-- not run: <reason> -->``; the reason must say why (a GPU, a cluster, your own files);
- in a ``bash``/``sh``/``shell``/``console`` block every line is a shell command (``\\``
  continues a line, ``&&``/``;`` separate commands, ``#`` starts a comment); in any other
  block only lines starting with ``$ `` are (a transcript: the lines after are its output);
- a command *starts a run* when it is ``python run.py ...`` (any path to ``run.py``),
  ``paddlecraft ...`` (not ``--help``/``--version``) or ``bash scripts/run.sh ...``,
  after any ``VAR=value`` prefix;
- a block whose first line (or a line of its leading comments: after a YAML config's
  ``# @package`` header) is ``# file: <path>`` is a whole file of the reader's project
  (``my_project/<path>``): tests/test_doc_files.py writes a page's files to a folder outside
  the repository and runs them there (the tag line is not part of the file);
- an inline command in prose (`` `python run.py arena=gan` ``) is a run command too when it is
  complete: no placeholder (``<run dir>``, ``...``, ``/your/folder``).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: an opening fence (any indent, inside list items too) up to its closing fence
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^[ \t]*```[ \t]*$", re.M | re.S
)
#: the marker that excuses the next block from running
MARKER = re.compile(r"^\s*<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console"})
#: the first line of a block that is a whole file of the reader's project
FILE_TAG = re.compile(r"^#\s*file:\s*(?P<path>[\w./-]+)\s*$")
#: flags of the command line that take a value
VALUE_FLAGS = frozenset({"--config-dir", "-cd", "--config-name", "-cn", "--cfg", "-c"})
#: what makes an inline command an example, not a command to copy
PLACEHOLDER = re.compile(r"<|>|\.\.\.|/your|/path/|/data/|\bS\b|\[|\(")


def pages() -> list[Path]:
    """The README and every page of the site (new pages are picked up)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass
class Block:
    """One fenced block of a page."""

    page: str  #: the page, relative to the repository root
    line: int  #: where the block opens (1-based)
    lang: str  #: the fence's language ("" when none)
    body: str  #: the text inside, dedented by the fence's indent
    not_run: str | None  #: the marker's reason, or None when the block is not marked

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def _tag_line(self) -> int | None:
        """The index of the ``# file:`` line among the block's leading comment lines (after a
        YAML config's ``# @package`` header, which Hydra reads only at the very top)."""
        for i, line in enumerate(self.body.split("\n")):
            if not line.startswith("#"):
                return None
            if FILE_TAG.match(line):
                return i
        return None

    @property
    def file(self) -> str | None:
        """The path a ``# file: <path>`` comment line gives the block (None: not a file)."""
        i = self._tag_line()
        return None if i is None else FILE_TAG.match(self.body.split("\n")[i]).group("path")

    @property
    def file_text(self) -> str:
        """The file's text: the block without its tag line."""
        lines = self.body.split("\n")
        i = self._tag_line()
        kept = lines if i is None else lines[:i] + lines[i + 1 :]
        return "\n".join(kept).rstrip("\n") + "\n"


@dataclass
class RunCommand:
    """A command that starts a run, as a reader would type it."""

    where: str  #: page:line
    text: str  #: the command as written
    args: list[str]  #: what follows the program (``arena=gan trainer.max_steps=2 ...``)
    not_run: str | None = None  #: the block's marker reason, if any
    inline: bool = False  #: from prose, not from a block
    expect: str | None = None  #: a transcript's ``error: ...`` line after the command

    @property
    def multirun(self) -> bool:
        return "-m" in self.args or "--multirun" in self.args

    def flag(self, *names: str) -> str | None:
        """The value of a flag (``--config-dir DIR`` or ``--config-dir=DIR``), or None."""
        for i, a in enumerate(self.args):
            if a in names and i + 1 < len(self.args):
                return self.args[i + 1]
            for n in names:
                if a.startswith(n + "="):
                    return a[len(n) + 1 :]
        return None

    def overrides(self) -> list[str]:
        """The ``key=value`` overrides, without the command line's flags."""
        out, skip = [], False
        for a in self.args:
            if skip:
                skip = False
            elif a in VALUE_FLAGS:
                skip = True
            elif not a.startswith("-"):
                out.append(a)
        return out


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page, with their markers."""
    text = page.read_text()
    rel = page.relative_to(ROOT).as_posix()
    out = []
    for m in FENCE.finditer(text):
        before = [ln for ln in text[: m.start()].splitlines() if ln.strip()]
        marker = MARKER.match(before[-1]) if before else None
        indent = len(m.group("indent"))
        body = "\n".join(
            ln[indent:] if not ln[:indent].strip() else ln.lstrip()
            for ln in m.group("body").splitlines()
        )
        reason = marker.group("reason") if marker else None
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(rel, line, m.group("lang").lower(), body, reason))
    return out


def _program_args(tokens: list[str]) -> list[str] | None:
    """The arguments of a run command, or None when ``tokens`` start no run."""
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0]):
        tokens = tokens[1:]  # OMP_NUM_THREADS=1 PYTHONPATH=. ...
    if not tokens:
        return None
    head = tokens[0]
    if head == "paddlecraft":
        rest = tokens[1:]
        if rest[:1] in (["--help"], ["-h"], ["--version"], ["-V"], ["--hydra-help"]):
            return None
        return rest
    if re.fullmatch(r"(\S*/)?python3?", head) and len(tokens) > 1:
        if Path(tokens[1]).name == "run.py" and "bench" not in Path(tokens[1]).parts:
            return tokens[2:]
        if tokens[1:3] == ["-m", "paddlecraft"]:
            return tokens[3:]
    if head == "bash" and len(tokens) > 1 and tokens[1].endswith("scripts/run.sh"):
        return tokens[2:]
    return None


def shell_commands(line: str) -> list[list[str]]:
    """The commands of one shell line, as token lists (``&&``, ``;``, ``|`` split them)."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    out, cur = [], []
    for t in tokens:
        if t in ("&&", ";", "||", "|"):
            out.append(cur)
            cur = []
        else:
            cur.append(t)
    out.append(cur)
    return [c for c in out if c]


def block_commands(block: Block) -> list[RunCommand]:
    """The run commands of one block."""
    text = re.sub(r"\\\n\s*", " ", block.body)
    out = []
    lines = text.splitlines()
    for n, line in enumerate(lines):
        stripped = line.strip()
        after = lines[n + 1].strip() if n + 1 < len(lines) else ""
        if block.lang not in SHELL_LANGS:
            if not stripped.startswith("$ "):
                continue
        stripped = stripped.removeprefix("$ ")
        for tokens in shell_commands(stripped):
            args = _program_args(tokens)
            if args is not None:
                where = f"{block.where}+{n + 1}"
                expect = (
                    after if line.strip().startswith("$ ") and after.startswith("error:") else None
                )
                out.append(RunCommand(where, " ".join(tokens), args, block.not_run, expect=expect))
    return out


#: the results page's ablation provenance: commands of removed settings, which run at the
#: commit each row names (``git checkout <last_commit>``), not on this one
AT_THEIR_COMMIT = re.compile(
    r"<!-- --8<-- \[start:ablations_provenance\] -->.*?<!-- --8<-- \[end:ablations_provenance\] -->",
    re.S,
)


def inline_commands(page: Path) -> list[RunCommand]:
    """Complete run commands written in prose (inside single backticks, outside blocks and
    outside the ablation provenance table)."""
    text = AT_THEIR_COMMIT.sub("", FENCE.sub("", page.read_text()))
    rel = page.relative_to(ROOT).as_posix()
    out = []
    for m in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", text):
        cmd = m.group(1).strip()
        if PLACEHOLDER.search(cmd):
            continue
        for tokens in shell_commands(cmd):
            args = _program_args(tokens)
            if args:  # a bare `paddlecraft` in prose names the command, it runs nothing
                out.append(RunCommand(rel, cmd, args, inline=True))
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]


def all_run_commands() -> list[RunCommand]:
    """Every run command of every page: blocks first, then prose."""
    out = [c for b in all_blocks() for c in block_commands(b)]
    for p in pages():
        out += inline_commands(p)
    return out


#: names a run folder holds in every arena: a paragraph naming three of them next to a run
#: folder's path (``runs/<arena>/<time>``) says what a run leaves
RUN_FILES = ("results.json", "metrics.jsonl", "config.yaml", "cli.log", "checkpoints/")
#: the marker before such a paragraph: the run (its overrides) whose folder it describes
RUN_FOLDER = re.compile(r"<!--\s*run folder:\s*(?P<args>[^>]*?)\s*-->")


@dataclass
class FolderPromise:
    """A paragraph that lists what a run leaves in its folder."""

    where: str  #: page:line
    args: list[str] | None  #: the marker's overrides (None: the paragraph is not marked)
    names: list[str]  #: the file and folder names it promises (``checkpoints/``, ``hops.json``)


def folder_promises(page: Path) -> list[FolderPromise]:
    """Every paragraph of a page that names what a run folder holds, with its marker."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    rel = page.relative_to(ROOT).as_posix()
    out = []
    pos = 0
    for para in re.split(r"(\n\s*\n)", text):
        start, pos = pos, pos + len(para)
        names = [n for n in re.findall(r"`([^`\s]+)`", para)
                 if re.fullmatch(r"[\w-]+(\.\w+|/)", n)]  # fmt: skip
        if len(set(names) & set(RUN_FILES)) < 3 or not re.search(r"runs/\S*<time>", para):
            continue
        marker = RUN_FOLDER.search(para)
        line = text.count("\n", 0, start) + para[: len(para) - len(para.lstrip())].count("\n") + 1
        args = marker.group("args").split() if marker else None
        out.append(FolderPromise(f"{rel}:{line}", args, names))
    return out
