"""Prints how many docs blocks of each kind were checked and how many were left unchecked."""
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import doc_blocks  # noqa: E402

CHECKED = {"program": "C++ programs compiled and linked", "compile": "C++ compiled",
           "sh": "sh blocks (commands parsed)", "console": "console blocks (commands parsed)",
           "toml": "TOML loaded", "json": "JSON parsed", "python": "Python compiled",
           "yaml": "YAML parsed"}
UNCHECKED = {"fragment": "C++ fragments (includes checked only)", "text": "text (output)",
             "skip": "skipped by a marker", "bad": "untagged or malformed"}


def pytest_terminal_summary(terminalreporter):
    root = os.environ.get("COHORT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    blocks = doc_blocks.all_blocks(root)
    count = collections.Counter(b.kind for b in blocks)
    w = terminalreporter
    w.section("docs blocks")
    w.line(f"{len(blocks)} fenced blocks in {len(doc_blocks.doc_files(root))} files")
    for table, title in ((CHECKED, "checked"), (UNCHECKED, "not checked")):
        w.line(f"{title}: {sum(count[k] for k in table)}")
        for k, label in table.items():
            if count[k]:
                w.line(f"  {count[k]:4d}  {label}")
    for b in blocks:
        if b.kind == "skip":
            w.line(f"  skipped {b.where}: {b.marker_arg}")
