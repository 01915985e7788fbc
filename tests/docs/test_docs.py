"""Every fenced code block of README.md and docs/*.md is checked (doc_blocks.py says how each
kind is), or marked as deliberately unchecked and counted. Run from CTest (docs_examples):
    COHORT_SOURCE_DIR=. COHORT_BUILD_DIR=build /usr/bin/python3 -m pytest tests/docs
"""
import json
import os
import re
import subprocess
import tempfile

import pytest

import cpp_build
import doc_blocks as db

ROOT = os.path.abspath(os.environ.get("COHORT_SOURCE_DIR",
                                      os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.path.abspath(os.environ.get("COHORT_BUILD_DIR", os.path.join(ROOT, "build")))
COHORT = os.path.join(BUILD, "bin", "cohort")
BLOCKS = db.all_blocks(ROOT)
CONFIG_SUBCOMMANDS = (["train"], ["fl", "run"], ["fl", "server"], ["fl", "client"],
                      ["config", "show"])
REPO_DIRS = ("scripts/", "bench/", "examples/", "tools/")


def blocks_of(*kinds):
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.kind in kinds]


def run(args, **kw):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


# ---- every block is something the test knows ---------------------------------------------------

def test_every_block_is_tagged():
    bad = [f"{b.where}: {'; '.join(b.problems)}" for b in BLOCKS if b.kind == "bad"]
    assert not bad, "\n".join(bad)


# ---- C++ ---------------------------------------------------------------------------------------

def cpp_source(b):
    return f'#line {b.line + 1} "{b.path}"\n{b.body}\n'


@pytest.fixture(scope="session")
def cpp_results(tmp_path_factory):
    tc = cpp_build.Toolchain(BUILD)
    jobs = {b.where: (cpp_source(b), b.kind == "program")
            for b in BLOCKS if b.kind in ("program", "compile")}
    return cpp_build.build_all(tc, jobs, str(tmp_path_factory.mktemp("cpp")))


@pytest.mark.parametrize("block", blocks_of("program", "compile"))
def test_cpp_builds(block, cpp_results):
    ok, output = cpp_results[block.where]
    what = "compile and link" if block.kind == "program" else "compile"
    assert ok, f"{block.where}: the C++ example does not {what}:\n{output[-4000:]}"


@pytest.mark.parametrize("block", blocks_of("fragment", "program", "compile"))
def test_cpp_includes_exist(block):
    missing = [h for h in re.findall(r'^\s*#include\s+"([^"]+)"', block.body, re.M)
               if not os.path.exists(os.path.join(ROOT, h))]
    assert not missing, f"{block.where}: no such header: {', '.join(missing)}"


# ---- shell -------------------------------------------------------------------------------------

def simple_commands(b):
    out = []
    for line in db.command_lines(b):
        try:
            out.extend((line, words) for words in db.split_commands(line))
        except ValueError as e:
            out.append((line, ValueError(str(e))))
    return out


def check_cohort(args):
    """Problems with one cohort command line: it must parse, and a config it names must load
    with its --set overrides."""
    r = run([COHORT, "--parse-only"] + args)
    if r.returncode != 0:
        return [f"does not parse: {(r.stderr or r.stdout).strip()[-600:]}"]
    for sub in CONFIG_SUBCOMMANDS:
        if args[:len(sub)] != sub:
            continue
        rest = args[len(sub):]
        config = next((a for a in rest if not a.startswith("-")), None)
        if config is None or not (config == "/dev/null" or config.startswith("examples/")):
            return []  # a config of the reader's own (my.toml): the parse is all we can check
        sets = [a for i, a in enumerate(rest) if i > 0 and rest[i - 1] == "--set"]
        sets += [a[len("--set="):] for a in rest if a.startswith("--set=")]
        r = run([COHORT, "config", "show", config] + [x for s in sets for x in ("--set", s)])
        if r.returncode != 0:
            return [f"config does not load: {(r.stderr or r.stdout).strip()[-600:]}"]
    return []


def build_targets():
    out = subprocess.run(["ninja", "-C", BUILD, "-t", "targets", "all"], capture_output=True,
                         text=True, check=True).stdout
    return {l.split(":")[0] for l in out.splitlines()}


def check_words(words, targets):
    if isinstance(words, ValueError):
        return [f"not a valid shell line: {words}"]
    problems = []
    for args in db.cohort_invocations(words):
        problems += check_cohort(args)
    prog = db.program(words) or ""
    rel = prog[2:] if prog.startswith("./") else prog
    if rel.startswith(REPO_DIRS) and not os.access(os.path.join(ROOT, rel), os.X_OK):
        problems.append(f"{prog}: no such executable in the repository")
    if rel.startswith("build/bin/") and not db.is_cohort(rel):
        if not os.path.exists(os.path.join(BUILD, rel[len("build/"):])):
            problems.append(f"{prog}: the build makes no such program")
    if prog == "cmake" and "--target" in words:
        names = words[words.index("--target") + 1:]
        names = names[:next((i for i, n in enumerate(names) if n.startswith("-")), len(names))]
        problems += [f"cmake: no target '{n}'" for n in names if n not in targets]
    return problems


@pytest.fixture(scope="session")
def targets():
    return build_targets()


@pytest.mark.parametrize("block", blocks_of("sh", "console"))
def test_shell_commands(block, targets):
    problems = []
    for line, words in simple_commands(block):
        problems += [f"  {line.strip()}\n    {p}" for p in check_words(words, targets)]
    assert not problems, f"{block.where}:\n" + "\n".join(problems)


# ---- configs and data --------------------------------------------------------------------------

@pytest.mark.parametrize("block", blocks_of("toml"))
def test_toml_loads(block):
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as fh:
        fh.write(block.body + "\n")
    try:
        r = run([COHORT, "config", "show", fh.name])
    finally:
        os.unlink(fh.name)
    assert r.returncode == 0, f"{block.where}: {r.stderr.strip()}"


@pytest.mark.parametrize("block", blocks_of("json"))
def test_json_parses(block):
    try:
        json.loads(block.body)
    except ValueError as e:
        pytest.fail(f"{block.where}: not JSON ({e}); tag elided output `text`")


@pytest.mark.parametrize("block", blocks_of("python"))
def test_python_compiles(block):
    try:
        compile(block.body, block.where, "exec")
    except SyntaxError as e:
        pytest.fail(f"{block.where}: {e}")


@pytest.mark.parametrize("block", blocks_of("yaml"))
def test_yaml_parses(block):
    yaml = pytest.importorskip("yaml")
    yaml.safe_load(block.body)
