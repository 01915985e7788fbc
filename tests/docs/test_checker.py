"""The docs test catches what it claims to: a wrong flag, an unknown config key, a missing
include, an untagged block. Each case is a small Markdown text run through the same checks."""
import pytest

import doc_blocks as db
import test_docs as td

PAGE = '''
```sh
./build/bin/cohort train examples/fashion_mlp.toml --worker 2
./build/bin/cohort train examples/fashion_mlp.toml --set train.eval_batchez=1
./build/bin/cohort trian examples/fashion_mlp.toml
./scripts/no-such-script.sh
./build/bin/cohort train examples/fashion_mlp.toml --workers 2 --set optim.lr=0.1
```

```
an untagged block
```

<!-- doc-test: fragment -->
```cpp
x = 1;
```

```cpp
#include <cstdio>
int main() { std::vector<int> v; return 0; }   // <vector> is missing
```

```cpp
struct NotAProgram {};
```
'''


@pytest.fixture(scope="module")
def blocks():
    return db.parse_markdown(PAGE, "page.md")


def test_kinds(blocks):
    assert [b.kind for b in blocks] == ["sh", "bad", "fragment", "program", "bad"]
    assert "no language" in blocks[1].problems[0]
    assert "without main()" in blocks[4].problems[0]


def test_shell_problems(blocks):
    got = [td.check_words(w, set()) for _, w in td.simple_commands(blocks[0])]
    assert "does not parse" in got[0][0] and "--worker" in got[0][0]
    assert "config does not load" in got[1][0] and "train.eval_batchez" in got[1][0]
    assert "does not parse" in got[2][0]
    assert "no such executable" in got[3][0]
    assert got[4] == []


def test_missing_include_fails(blocks, tmp_path):
    tc = td.cpp_build.Toolchain(td.BUILD)
    ok, out = td.cpp_build.build_all(tc, {"b": (td.cpp_source(blocks[3]), True)},
                                     str(tmp_path))["b"]
    assert not ok and "page.md:" in out and "vector" in out
