#!/usr/bin/env python3
"""Removes from an lcov tracefile the branches gcov marks as exception edges ("throw":
the unwinding paths a call takes only when it throws, here only on a failed
allocation), as lcov's `geninfo_no_exception_branch` option would; Debian's lcov 1.16
accepts that option and ignores it. Reads the flags from gcov's JSON output for every
.gcda under BUILD; a line's branches keep geninfo's order, so branch i of a line is
dropped when some translation unit marks its branch i as an exception edge.
Prints how many branches it dropped, and writes beside OUT.info the list of source lines
with a branch no run took (uncovered_branches.txt), so an audit sees what no test or
property reaches.

Usage: drop_exception_edges.py BUILD IN.info OUT.info
"""
import gzip
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path


def exception_edges(build):
    """{(source, line): set of branch indices that are exception edges}"""
    edges = defaultdict(set)
    gcdas = sorted(Path(build).resolve().rglob("*.gcda"))
    with tempfile.TemporaryDirectory() as work:
        for gcda in gcdas:
            subprocess.run(["gcov", "--json-format", "--branch-probabilities", "-o", str(gcda.parent), str(gcda)], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            for out in Path(work).glob("*.gcov.json.gz"):
                data = json.load(gzip.open(out))
                for f in data.get("files", []):
                    source = str(Path(data.get("current_working_directory", "")) / f["file"])
                    source = str(Path(source).resolve())
                    for line in f.get("lines", []):
                        for i, b in enumerate(line.get("branches", [])):
                            if b.get("throw"):
                                edges[(source, line["line_number"])].add(i)
                out.unlink()
    return edges


def main():
    build, src, dst = sys.argv[1:4]
    edges = exception_edges(build)
    dropped, source, out = 0, None, []
    untaken = defaultdict(int)
    for record in Path(src).read_text().splitlines():
        if record.startswith("SF:"):
            source = str(Path(record[3:]).resolve())
        elif record.startswith("BRDA:"):
            line, _block, branch, taken = record[5:].split(",")
            if int(branch) in edges.get((source, int(line)), ()):
                dropped += 1
                continue
            if taken in ("-", "0"):
                untaken[(source, int(line))] += 1
        elif record.startswith(("BRF:", "BRH:")):
            continue  # recounted by lcov from the BRDA records left
        out.append(record)
    Path(dst).write_text("\n".join(out) + "\n")
    listing = []
    for (path, line), n in sorted(untaken.items()):
        text = Path(path).read_text(errors="replace").splitlines()[line - 1].strip()
        listing.append(f"{Path(path).relative_to(Path.cwd())}:{line}: {n} untaken: {text}")
    (Path(dst).parent / "uncovered_branches.txt").write_text("\n".join(listing) + "\n")
    print(f"coverage: {dropped} exception edges dropped from the branch count; "
          f"{len(listing)} lines with an untaken branch: "
          f"{Path(dst).parent / 'uncovered_branches.txt'}")


if __name__ == "__main__":
    main()
