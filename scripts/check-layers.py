#!/usr/bin/python3
"""Checks every `#include "cohort/..."` and `#include "tools/..."` in cohort/ and tools/ against
the layer table of docs/architecture.md (section "Layers and what may include what").

The table (a Markdown table whose header starts `| level | folder | may include |`):
  level        an integer; a folder may include only folders of a lower level
  folder       a folder under cohort/ (`comm/`, `comm/service/`), or `tools/cohort/`; a file
               belongs to the longest folder of the table that holds it
  may include  the folders it may include, comma-separated (`core/`, `tensor/`), `parallel/*`
               for a folder and every folder of the table under it, or `-` for none
An optional second table, header `| file | includes | reason |`, lists single includes that are
allowed against the rules, each with its reason.

Reported, each as file:line, the include and the rule it breaks:
  - an upward include (to a folder of the same or a higher level),
  - an include of a folder that is not in the file's "may include",
  - an include of a header under no folder of the table, or of a header that does not exist,
  - a cycle between folders (the folders, and one include for each step),
  - a folder with sources that has no row, a row whose folder does not exist, a "may include"
    that names no row or an upper folder, an exception that matches no include.
Exit status: 0 when all holds, 1 when something is reported, 2 when the table cannot be read.

    scripts/check-layers.py [--root DIR] [--doc docs/architecture.md] [--graph]
"""
import argparse
import os
import re
import sys
from collections import defaultdict

SOURCE_DIRS = ("cohort", "tools")
SOURCE_EXTS = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh", ".inc", ".inl")
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:cohort|tools)/[^"]+)"')
RULES_HEADER = ("level", "folder", "may include")
EXCEPTIONS_HEADER = ("file", "includes", "reason")


class TableError(Exception):
    pass


def cells(line):
    line = line.strip()
    if not (line.startswith("|") and line.endswith("|")):
        return None
    return [c.strip() for c in line[1:-1].split("|")]


def tables(text):
    """Every Markdown table of `text`: (line number of its header, header cells, rows), each
    row (line number, cells)."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        head = cells(lines[i])
        sep = cells(lines[i + 1]) if i + 1 < len(lines) else None
        if head and sep and all(re.fullmatch(r":?-+:?", c) for c in sep):
            rows, j = [], i + 2
            while j < len(lines) and cells(lines[j]) is not None:
                rows.append((j + 1, cells(lines[j])))
                j += 1
            out.append((i + 1, [h.lower() for h in head], rows))
            i = j
        else:
            i += 1
    return out


def folder_name(cell):
    """`comm/service/` -> "comm/service"; `tools/cohort/` -> "tools/cohort"."""
    name = cell.strip().strip("`").strip().rstrip("/")
    return name


def repo_path(folder):
    """The folder's path in the repository: tools/... as written, the rest under cohort/."""
    return folder if folder.startswith("tools/") else "cohort/" + folder


class Rules:
    def __init__(self, doc_path, doc_text):
        self.doc = doc_path
        self.level, self.allow, self.row_line = {}, {}, {}
        self.exceptions = {}  # (file, include) -> [line, reason, used]
        found = False
        for _, head, rows in tables(doc_text):
            if tuple(head[:3]) == RULES_HEADER:
                found = True
                self._read_rules(rows)
            elif tuple(head[:3]) == EXCEPTIONS_HEADER:
                for line, c in rows:
                    key = (c[0].strip("` "), c[1].strip("` ").strip('"'))
                    self.exceptions[key] = [line, c[2] if len(c) > 2 else "", False]
        if not found:
            raise TableError(f"{doc_path}: no table with the header "
                             f"| {' | '.join(RULES_HEADER)} |")
        self.repo = {f: repo_path(f) for f in self.level}

    def _read_rules(self, rows):
        for line, c in rows:
            if len(c) < 3:
                raise TableError(f"{self.doc}:{line}: a row needs level, folder and may include")
            folder = folder_name(c[1])
            try:
                level = int(c[0].strip("` "))
            except ValueError:
                raise TableError(f"{self.doc}:{line}: level '{c[0]}' is not an integer")
            if folder in self.level:
                raise TableError(f"{self.doc}:{line}: folder {folder}/ has two rows")
            self.level[folder], self.row_line[folder] = level, line
            allowed = c[2].strip()
            self.allow[folder] = ([] if allowed in ("-", "", "—", "nothing")
                                  else [folder_name(a) for a in allowed.split(",")])

    def unit_of(self, path):
        """The table folder that holds repository path `path` (longest match), or None."""
        best = None
        for f, rp in self.repo.items():
            if path.startswith(rp + "/") and (best is None or len(rp) > len(self.repo[best])):
                best = f
        return best

    def expand(self, entry):
        """The table folders an entry of "may include" names."""
        if entry.endswith("/*"):
            base = entry[:-2]
            return [f for f in self.level if f == base or f.startswith(base + "/")]
        return [entry] if entry in self.level else []

    def allowed(self, folder):
        return {f for e in self.allow[folder] for f in self.expand(e)}


def where(rules, folder):
    return f"{rules.doc}:{rules.row_line[folder]}"


def check_table(rules, root):
    problems = []
    for f in sorted(rules.level):
        if not os.path.isdir(os.path.join(root, rules.repo[f])):
            problems.append(f"{where(rules, f)}: row {f}/: the folder {rules.repo[f]}/ does not "
                            f"exist (moved? update the table)")
        for e in rules.allow[f]:
            targets = rules.expand(e)
            if not targets:
                problems.append(f"{where(rules, f)}: row {f}/ may include {e}/, which is no row "
                                f"of the table")
            for t in targets:
                if t != f and rules.level[t] >= rules.level[f]:
                    problems.append(
                        f"{where(rules, f)}: row {f}/ (level {rules.level[f]}) may include {t}/ "
                        f"(level {rules.level[t]}): a folder includes only lower levels")
    return problems


def source_files(root):
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(SOURCE_EXTS):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def scan(rules, root):
    """Checks every include. Returns (problems, edges: (from, to) -> first (file, line, include),
    number of includes checked, number of files)."""
    problems, edges, n_inc, n_files = [], {}, 0, 0
    rowless = defaultdict(list)
    for path in source_files(root):
        n_files += 1
        src = rules.unit_of(path)
        if src is None:
            rowless[os.path.dirname(path)].append(path)
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                n_inc += 1
                inc = m.group(1)
                at = f'{path}:{lineno}: #include "{inc}"'
                exc = rules.exceptions.get((path, inc))
                if exc:
                    exc[2] = True
                    continue
                dst = rules.unit_of(inc)
                if not os.path.isfile(os.path.join(root, inc)):
                    problems.append(f"{at}: no such header")
                if dst is None:
                    problems.append(f"{at}: {os.path.dirname(inc)}/ is in no row of the table "
                                    f"({rules.doc})")
                    continue
                if dst == src:
                    continue
                edges.setdefault((src, dst), (path, lineno, inc))
                if rules.level[dst] >= rules.level[src]:
                    problems.append(
                        f"{at}: upward include: {src}/ (level {rules.level[src]}) includes "
                        f"{dst}/ (level {rules.level[dst]}); a folder includes only lower levels "
                        f"({where(rules, src)})")
                elif dst not in rules.allowed(src):
                    may = ", ".join(e if e.endswith("*") else e + "/"
                                    for e in rules.allow[src]) or "nothing"
                    problems.append(f"{at}: {src}/ may not include {dst}/ (it may include: "
                                    f"{may}; {where(rules, src)})")
    for d, files in sorted(rowless.items()):
        problems.append(f"{files[0]}: {d}/ ({len(files)} files) is in no row of the table "
                        f"({rules.doc}): add a row")
    for (path, inc), (line, reason, used) in sorted(rules.exceptions.items()):
        if not used:
            problems.append(f'{rules.doc}:{line}: exception {path}: #include "{inc}" matches no '
                            f"include: remove the row")
    return problems, edges, n_inc, n_files


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan), each in a stable order."""
    succ = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycle_problems(edges, rules, label):
    problems = []
    for comp in cycles(rules.level.keys(), edges):
        steps = []
        for a in comp:
            for b in comp:
                if (a, b) in edges:
                    e = edges[(a, b)]
                    steps.append(f"  {a}/ -> {b}/" + (f': {e[0]}:{e[1]}: #include "{e[2]}"'
                                                       if isinstance(e, tuple) else ""))
        problems.append(f"cycle between folders ({label}): " + ", ".join(f + "/" for f in comp)
                        + "\n" + "\n".join(steps))
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--doc", default="docs/architecture.md")
    ap.add_argument("--graph", action="store_true",
                    help="print the folder graph the code has (folder: the folders it includes)")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.root)
    try:
        with open(os.path.join(root, a.doc), encoding="utf-8") as fh:
            rules = Rules(a.doc, fh.read())
    except (OSError, TableError) as e:
        print(f"check-layers: {e}", file=sys.stderr)
        return 2
    problems = check_table(rules, root)
    allowed_edges = {(f, t): None for f in rules.level for t in rules.allowed(f) if t != f}
    problems += cycle_problems(allowed_edges, rules, "the table allows it")
    found, edges, n_inc, n_files = scan(rules, root)
    problems += found
    problems += cycle_problems(edges, rules, "the code has it")
    if a.graph:
        for f in sorted(rules.level, key=lambda f: (rules.level[f], f)):
            used = sorted(t for (s, t) in edges if s == f)
            print(f"{rules.level[f]:>2} {f}/: {', '.join(t + '/' for t in used) or '-'}")
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} problem(s) in {n_inc} includes of {n_files} files "
              f"against {len(rules.level)} folders of {a.doc}", file=sys.stderr)
        return 1
    print(f"check-layers: {n_inc} includes of {n_files} files follow the {len(rules.level)} "
          f"folders of {a.doc}; no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
