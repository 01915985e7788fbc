"""Compiles the docs' C++ blocks with the exact flags the build uses for a program linked against
the whole library: those of the docs_example_probe target (tests/docs/CMakeLists.txt), read from
Ninja (`ninja -t commands`) and re-aimed at each block's source. Blocks compile in parallel, at
-O0 (the check is that they compile and link, not how fast they run)."""
import concurrent.futures
import os
import re
import shlex
import subprocess

PROBE = "docs_example_probe"


class Toolchain:
    def __init__(self, build_dir):
        self.build_dir = build_dir
        out = subprocess.run(["ninja", "-C", build_dir, "-t", "commands", PROBE],
                             capture_output=True, text=True, check=True).stdout
        lines = [l for l in out.splitlines() if l.strip()]
        compile_line = next(l for l in lines if re.search(r"\s-c\s+\S*probe\.cc\s*$", l))
        self.compile = self._strip_depfile(shlex.split(compile_line))
        link = lines[-1].strip()
        link = re.sub(r"^:\s*&&\s*", "", link)
        link = re.sub(r"\s*&&\s*:\s*$", "", link)
        self.link = shlex.split(link)

    @staticmethod
    def _strip_depfile(args):
        out, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("-MT", "-MF"):
                skip = True
            elif a not in ("-MD", "-MMD"):
                out.append(a)
        return out

    def compile_cmd(self, src, obj):
        args, i = [], 0
        while i < len(self.compile):
            a = self.compile[i]
            if a == "-o":
                args += ["-o", obj]
                i += 2
            elif a == "-c":
                args += ["-c", src]
                i += 2
            else:
                args.append(a)
                i += 1
        return args + ["-O0", "-g0"]

    def link_cmd(self, obj, exe):
        args, i = [], 0
        while i < len(self.link):
            a = self.link[i]
            if a == "-o":
                args += ["-o", exe]
                i += 2
            elif a.endswith("probe.cc.o"):
                args.append(obj)
                i += 1
            else:
                args.append(a)
                i += 1
        return args


def build_one(tc, src, work, link):
    """Compiles (and links) one source file; returns (ok, output)."""
    stem = os.path.splitext(os.path.basename(src))[0]
    obj = os.path.join(work, stem + ".o")
    r = subprocess.run(tc.compile_cmd(src, obj), cwd=tc.build_dir, capture_output=True,
                       text=True)
    if r.returncode != 0 or not link:
        return r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(tc.link_cmd(obj, os.path.join(work, stem)), cwd=tc.build_dir,
                       capture_output=True, text=True)
    return r.returncode == 0, r.stdout + r.stderr


def build_all(tc, jobs, work):
    """jobs: {key: (source text, link?)}. Returns {key: (ok, compiler output)}."""
    os.makedirs(work, exist_ok=True)
    futures = {}
    n = max(1, min(len(jobs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        for i, (key, (text, link)) in enumerate(sorted(jobs.items())):
            src = os.path.join(work, f"block{i:03d}.cc")
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(text)
            futures[key] = pool.submit(build_one, tc, src, work, link)
    return {k: f.result() for k, f in futures.items()}
