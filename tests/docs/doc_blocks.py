"""Fenced code blocks of README.md and docs/*.md, and what the docs test does with each.

A block's kind comes from its info string (```cpp, ```sh, ...) and from an optional marker, an
HTML comment on the nearest non-blank line above the fence:

    <!-- doc-test: fragment -->        C++ that is not a whole program: not compiled, its
                                       #include lines must name existing headers; counted
    <!-- doc-test: compile -->         C++ declarations without main(): compiled, not linked
    <!-- doc-test: skip REASON -->     any block deliberately left unchecked; counted

Kinds and their checks (test_docs.py):
    cpp           a program (it has main()): compiled and linked against the library
    sh            every line a command (`\\` continues, `#` comments)
    console       `$ ` lines are commands, the others their output
    toml          parsed by `cohort config show`
    json          parsed by json.loads
    python        compiled (syntax) by Python
    yaml          parsed by yaml.safe_load
    text          output, diagrams, formulas: not checked; counted
A block without an info string is an error: say what it is.
"""
import glob
import os
import re
import shlex
from dataclasses import dataclass, field

LANG_ALIASES = {"c++": "cpp", "cc": "cpp", "bash": "sh", "shell": "sh", "shell-session": "console"}
KNOWN_LANGS = {"cpp", "sh", "console", "toml", "json", "python", "yaml", "text"}
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    path: str            # relative to the repository root
    line: int            # 1-based line of the opening fence
    lang: str            # normalised info string ("" when there is none)
    body: str
    marker: str = ""     # "fragment", "compile", "skip" or ""
    marker_arg: str = ""
    problems: list = field(default_factory=list)

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    @property
    def kind(self):
        """What the test does: program, compile, fragment, sh, console, toml, json, python,
        yaml, text, skip, or "bad" (the problems say why)."""
        if self.problems:
            return "bad"
        if self.marker == "skip":
            return "skip"
        if self.lang == "cpp":
            if self.marker in ("fragment", "compile"):
                return self.marker
            return "program"
        return self.lang


def doc_files(root):
    """README.md and every docs/*.md, relative to root, in a stable order."""
    files = ["README.md"] + sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.exists(os.path.join(root, f))]


def parse_markdown(text, path):
    """Every fenced block of one Markdown text, with its marker and any problem."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$"
                                              % len(fence), lines[j]):
            j += 1
        indent = len(m.group(1))
        body = "\n".join(l[indent:] if not l[:indent].strip() else l.lstrip()
                         for l in lines[i + 1:j])
        b = Block(path, i + 1, LANG_ALIASES.get(lang, lang), body)
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mk = MARKER.match(lines[k]) if k >= 0 else None
        if mk:
            b.marker, b.marker_arg = mk.group(1), mk.group(2)
        classify(b, closed=j < len(lines))
        blocks.append(b)
        i = j + 1
    return blocks


def classify(b, closed=True):
    """Records in b.problems why a block cannot be checked as written."""
    if not closed:
        b.problems.append("the fence is never closed")
    if not b.lang:
        b.problems.append("no language after ```: tag it (cpp, sh, console, toml, json, "
                          "python, yaml, or text for output and diagrams)")
    elif b.lang not in KNOWN_LANGS:
        b.problems.append(f"language '{b.lang}' is not one the docs test knows "
                          f"({', '.join(sorted(KNOWN_LANGS))})")
    if b.marker and b.marker not in ("fragment", "compile", "skip"):
        b.problems.append(f"unknown marker 'doc-test: {b.marker}' (fragment, compile, skip)")
    if b.marker in ("fragment", "compile") and b.lang != "cpp":
        b.problems.append(f"'doc-test: {b.marker}' is for cpp blocks")
    if b.marker == "skip" and not b.marker_arg:
        b.problems.append("'doc-test: skip' needs a reason")
    if b.lang == "cpp" and not b.marker and not re.search(r"\bint\s+main\s*\(", b.body):
        b.problems.append("C++ without main(): make it a whole program, or mark it "
                          "<!-- doc-test: compile --> (declarations) or "
                          "<!-- doc-test: fragment -->")


def all_blocks(root):
    out = []
    for f in doc_files(root):
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            out.extend(parse_markdown(fh.read(), f))
    return out


# ---- shell command lines ---------------------------------------------------------------------

def command_lines(b):
    """The command lines of a sh or console block, continuation lines joined."""
    lines, cur = [], ""
    for raw in b.body.split("\n"):
        if not cur:
            if b.kind == "console":
                if not raw.startswith("$ "):
                    continue
                raw = raw[2:]
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        if open_quote(cur + raw):  # a quoted argument goes on to the next line
            cur += raw + "\n"
            continue
        lines.append(cur + raw)
        cur = ""
    if cur:
        lines.append(cur)
    return lines


def open_quote(line):
    try:
        shlex.split(line, comments=True)
        return False
    except ValueError:
        return True


SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", ";;"}
REDIRECTS = {">", ">>", "<", "2>", "&>", ">&", "2>&1", "<<"}


def split_commands(line):
    """Simple commands of one line: lists of words, split at | && || ; & and parentheses;
    redirections and what follows them are dropped. Raises ValueError on bad quoting."""
    lex = shlex.shlex(line, posix=True, punctuation_chars="();<>|&")
    lex.whitespace_split = True
    lex.commenters = "#"
    words, cmds, skip_next = [], [], False
    for tok in lex:
        if tok in SEPARATORS:
            if words:
                cmds.append(words)
            words = []
        elif tok in REDIRECTS or tok.startswith(">") or tok.startswith("<"):
            skip_next = True
        elif skip_next:
            skip_next = False
        else:
            words.append(tok)
    if words:
        cmds.append(words)
    return cmds


def is_cohort(word):
    return word == "cohort" or word.endswith("/bin/cohort")


def cohort_invocations(words):
    """The argument list after every cohort executable in one simple command: the program
    itself, a path ending in bin/cohort anywhere (torchrun, mpirun or `cohort run -n 2 --`
    may run it), or a bare `cohort` after `--`."""
    out, prog = [], program(words)
    for i, w in enumerate(words):
        if (w == prog and is_cohort(w)) or w.endswith("/bin/cohort") or (
                w == "cohort" and i > 0 and words[i - 1] == "--"):
            out.append(words[i + 1:])
    return out


def program(words):
    """The program a simple command runs, after VAR=value assignments (None if there is none)."""
    for w in words:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):
            continue
        return w
    return None
