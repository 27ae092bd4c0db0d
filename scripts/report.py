#!/usr/bin/env python3
"""Writes the verification report (report.md) from what scripts/main.sh left in
its report folder: GoogleTest XML of every unit and property suite (junit/), the
corpus replay and libFuzzer logs (fuzz/) and the run's settings (settings.txt).
Prints a per-component summary; exits 1 when any step failed or is missing.

Usage: scripts/report.py REPORT_DIR COMPONENT...
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def suite_cases(path):
    """Every testcase of a GoogleTest XML file as a dict, or None if absent."""
    if not path.exists():
        return None
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return None
    cases = []
    for tc in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        failures = [f.get("message", "") for f in tc.findall("failure")]
        status = "FAIL" if failures else ("skipped" if tc.get("result") == "skipped" else "pass")
        cases.append(dict(suite=tc.get("classname"), name=tc.get("name"), time=float(tc.get("time", 0)),
                          level=props.get("agreement_level", "-"), cases=props.get("cases", "-"),
                          replay=props.get("replay"), status=status, failures=failures))
    return cases


def component_cases(out, component, kind):
    """The cases of every suite of a component of one kind (test or props): STEM_KIND.xml and
    STEM_*_KIND.xml (the CUDA suites, the state contract's, ...); None if STEM_KIND.xml is
    missing or any suite's file is unreadable."""
    main = suite_cases(out / "junit" / f"{component}_{kind}.xml")
    if main is None:
        return None
    for path in sorted((out / "junit").glob(f"{component}_*_{kind}.xml")):
        more = suite_cases(path)
        if more is None:
            return None
        main += more
    return main


def backend_of(suite, component):
    """WitnessCpu -> cpu, IndexerCuda -> cuda, PagingModel -> model."""
    rest = suite[len(component):] if suite.lower().startswith(component) else suite
    return rest.lower() or "-"


def fuzz_replay(path):
    if not path.exists():
        return "not run", False
    text = path.read_text(errors="replace")
    m = re.search(r"replay: (\d+) inputs, no difference", text)
    if m:
        return f"{m.group(1)} inputs agree", True
    bad = re.search(r"replay: failed on (\S+)", text)
    return f"FAILED{' on ' + bad.group(1) if bad else ''}", False


def fuzz_run(path, corpus):
    """libFuzzer's final stats: executions, exec/s, corpus size, new inputs."""
    if not path.exists():
        return None
    text = path.read_text(errors="replace")
    stat = dict(re.findall(r"stat::(\w+):\s*(\d+)", text))
    ok = "100% tests passed" in text and stat != {}  # ctest's verdict, and stats printed
    corpus_n = sum(1 for f in corpus.iterdir() if f.is_file()) if corpus.is_dir() else 0
    new = re.search(r"aether: new_inputs: (\d+)", text)
    return dict(execs=stat.get("number_of_executed_units", "?"),
                rate=stat.get("average_exec_per_sec", "?"), corpus=corpus_n, new=new.group(1) if new else "?", ok=ok,
                tail="\n".join(text.splitlines()[-30:]))


def main():
    out, components = Path(sys.argv[1]), sys.argv[2:]
    root = Path(__file__).resolve().parent.parent
    settings = (out / "settings.txt").read_text() if (out / "settings.txt").exists() else ""
    body, summary, failures, failing_steps = [], [], [], 0
    for c in components:
        body.append(f"\n## {c}\n")
        unit = component_cases(out, c, "test")
        props = component_cases(out, c, "props")
        row = [c]
        for kind, cases in (("unit tests", unit), ("properties", props)):
            if cases is None:
                row.append("FAILED (no results)")
                failing_steps += 1
                log = out / "logs" / f"{c}_{'test' if kind == 'unit tests' else 'props'}.log"
                tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
                failures.append((f"{c} {kind}", "the suite did not finish (a crash, or no binary); "
                                 "its log ends:\n" + "\n".join(tail)))
                continue
            n = {s: sum(1 for t in cases if t["status"] == s) for s in ("pass", "FAIL", "skipped")}
            cell = f"{n['pass']} passed" + (f", {n['skipped']} skipped" if n["skipped"] else "")
            if n["FAIL"]:
                cell = f"**{n['FAIL']} FAILED**, " + cell
                failing_steps += 1
            row.append(cell)
            for t in cases:
                if t["status"] == "FAIL":
                    text = "\n".join(t["failures"])
                    if t["replay"] and t["replay"] not in text:
                        text += "\n" + t["replay"]
                    failures.append((f"{t['suite']}.{t['name']}", text))
        if props:
            body.append("| backend | property | level | cases | time (s) | result |")
            body.append("| --- | --- | --- | --- | --- | --- |")
            for t in props:
                body.append(f"| {backend_of(t['suite'], c)} | `{t['name']}` | {t['level']} | "
                            f"{t['cases']} | {t['time']:.2f} | {t['status']} |")
        if unit is not None:
            skipped = sum(1 for t in unit if t["status"] == "skipped")
            body.append(f"\nUnit tests: {len(unit)} ({skipped} skipped: they need a CUDA device)."
                        if skipped else f"\nUnit tests: {len(unit)}.")
        if (root / "fuzz" / "corpus" / f"{c}_fuzz").is_dir():
            replay, ok = fuzz_replay(out / "fuzz" / f"{c}_replay.log")
            failing_steps += 0 if ok else 1
            if not ok:
                failures.append((f"{c} fuzz replay", (out / "fuzz" / f"{c}_replay.log").read_text(
                    errors="replace")[-4000:] if (out / "fuzz" / f"{c}_replay.log").exists() else replay))
            run = fuzz_run(out / "fuzz" / f"{c}_run.log", root / "fuzz" / "corpus" / f"{c}_fuzz")
            if run is None:
                run_cell = "not run"
            else:
                run_cell = (f"{run['execs']} executions, {run['rate']} exec/s, corpus {run['corpus']}, "
                            f"{run['new']} new inputs")
                if not run["ok"]:
                    run_cell = "**FAILED** " + run_cell
                    failing_steps += 1
                    failures.append((f"{c} fuzz run", run["tail"]))
            body.append(f"\nFuzzing: corpus replay {replay}; libFuzzer run: {run_cell}.")
            row += [replay, run_cell]
        else:
            row += ["-", "-"]
        summary.append(row)

    lines = ["# aether verification report", "", settings.strip(), "",
             "| component | unit tests | properties | fuzz replay | fuzz run |",
             "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(r) + " |" for r in summary]
    lines += ["", "Agreement levels (docs/architecture.md): L0 bit-exact, L1 exact grid, L2 certified "
              "enclosure, L3 path invariance; `model` marks an invariant of the model itself."]
    lines += body
    if failures:
        lines += ["", "## Failures", ""]
        for what, text in failures:
            lines += [f"### {what}", "", "```", text.strip(), "```", ""]
    verdict = "PASS" if failing_steps == 0 else f"FAIL ({failing_steps} failing steps)"
    lines += ["", f"Result: {verdict}"]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    for r in summary:
        print(f"  {r[0]:<10} unit: {r[1]}; props: {r[2]}; replay: {r[3]}; fuzz: {r[4]}")
    print(f"report: {out / 'report.md'} ({verdict})")
    return 0 if failing_steps == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
