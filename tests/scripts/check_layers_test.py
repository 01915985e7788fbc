"""scripts/check-layers.py on small made-up trees: what it reports, and that it passes a clean one.
Run from CTest (check_layers_selftest): /usr/bin/python3 tests/scripts/check_layers_test.py"""
import contextlib
import importlib.util
import io
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "check-layers.py")
spec = importlib.util.spec_from_file_location("check_layers", SCRIPT)
check_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_layers)

SERVICE = "cohort/comm/service/v.h"
TABLE = """# Architecture

| level | folder | may include | holds |
|---|---|---|---|
| 0 | `core/` | - | basics |
| 1 | `net/` | `core/` | sockets |
| 2 | `comm/` | `core/`, `net/` | collectives |
| 2 | `comm/service/` | `net/` | the service channel |
| 3 | `train/` | `core/`, `comm/*` | the loop |
| 4 | `tools/cohort/` | `train/`, `core/` | the CLI |
"""


class CheckLayers(unittest.TestCase):
    def tree(self, files, table=TABLE):
        root = tempfile.mkdtemp(prefix="check_layers_")
        self.addCleanup(lambda: __import__("shutil").rmtree(root))
        os.makedirs(os.path.join(root, "docs"))
        with open(os.path.join(root, "docs", "architecture.md"), "w") as f:
            f.write(table)
        base = {"cohort/core/a.h": "", "cohort/net/s.h": '#include "cohort/core/a.h"\n',
                "cohort/comm/c.h": '#include "cohort/net/s.h"\n',
                "cohort/comm/service/v.h": '#include "cohort/net/s.h"\n',
                "cohort/train/t.cc":
                    '#include "cohort/comm/c.h"\n#include "cohort/comm/service/v.h"\n',
                "tools/cohort/main.cc": '#include "cohort/train/t.cc"\n'}
        base.update(files)
        for path, text in base.items():
            if text is None:
                continue
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return root

    def run_check(self, root):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            rc = check_layers.main(["--root", root])
        return rc, out.getvalue()

    def test_clean_tree_passes(self):
        rc, out = self.run_check(self.tree({}))
        self.assertEqual(rc, 0, out)

    def test_upward_include(self):
        rc, out = self.run_check(self.tree({"cohort/net/s.h": '\n#include "cohort/comm/c.h"\n'}))
        self.assertEqual(rc, 1)
        self.assertIn('cohort/net/s.h:2: #include "cohort/comm/c.h": upward include: net/ '
                      "(level 1) includes comm/ (level 2)", out)
        self.assertIn("cycle between folders (the code has it): comm/, net/", out)

    def test_folder_not_allowed(self):
        rc, out = self.run_check(self.tree({SERVICE: '#include "cohort/core/a.h"\n'}))
        self.assertEqual(rc, 1)
        self.assertIn("comm/service/ may not include core/ (it may include: net/", out)

    def test_subfolder_row_is_its_own_folder(self):
        # comm/ and comm/service/ are both level 2: neither may include the other.
        rc, out = self.run_check(self.tree({SERVICE: '#include "cohort/comm/c.h"\n'}))
        self.assertEqual(rc, 1)
        self.assertIn("upward include: comm/service/ (level 2) includes comm/ (level 2)", out)

    def test_rowless_folder_missing_folder_and_missing_header(self):
        rc, out = self.run_check(self.tree({"cohort/extra/x.cc": "", "cohort/net/s.h": None,
                                            "cohort/core/b.cc": '#include "cohort/core/nope.h"\n'}))
        self.assertEqual(rc, 1)
        self.assertIn("cohort/extra/ (1 files) is in no row of the table", out)
        self.assertIn("row net/: the folder cohort/net/ does not exist", out)
        self.assertIn('cohort/core/b.cc:1: #include "cohort/core/nope.h": no such header', out)

    def test_table_allows_upward(self):
        table = TABLE.replace("| 1 | `net/` | `core/` |", "| 1 | `net/` | `core/`, `comm/` |")
        rc, out = self.run_check(self.tree({}, table))
        self.assertEqual(rc, 1)
        self.assertIn("row net/ (level 1) may include comm/ (level 2)", out)

    def test_exception_rows(self):
        table = TABLE + ("\n| file | includes | reason |\n|---|---|---|\n"
                         "| `cohort/comm/service/v.h` | `cohort/core/a.h` | a test |\n"
                         "| `cohort/core/a.h` | `cohort/net/s.h` | stale |\n")
        rc, out = self.run_check(self.tree({SERVICE: '#include "cohort/core/a.h"\n'},
                                           table))
        self.assertEqual(rc, 1)
        self.assertNotIn("may not include core/", out)
        self.assertIn('exception cohort/core/a.h: #include "cohort/net/s.h" matches no '
                      "include", out)

    def test_no_table(self):
        root = self.tree({}, "# Architecture\n")
        rc, _ = self.run_check(root)
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    unittest.main()
