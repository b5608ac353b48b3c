#!/usr/bin/env python3
"""CTest check of tools/record_torch_trace.py without pytest: records the demo model (a tied head
reached through F.linear) and replays it with `zero3 replay`, which must accept the trace, see the
tied weight as an external parameter, find nothing wrong, and predict a non-zero compute time.
Run it with the interpreter that has PyTorch: Debian's /usr/bin/python3 with python3-torch, which
tools/lib/build.sh installs; without PyTorch it fails and says so (CTest must not skip it).

    tools/record_torch_trace_test.py build/tools/zero3
"""
import json
import re
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    if len(sys.argv) != 2:
        print("usage: record_torch_trace_test.py PATH_TO_ZERO3", file=sys.stderr)
        return 1
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"FAIL: {sys.executable} cannot import torch: apt-get install python3-torch (tools/lib/build.sh does)")
        return 1
    zero3 = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        trace_path = os.path.join(folder, "demo.json")
        report_path = os.path.join(folder, "report.json")
        subprocess.run([sys.executable, os.path.join(HERE, "record_torch_trace.py"), "--demo", trace_path], check=True)
        trace = json.load(open(trace_path))
        events = [e for step in trace["steps"] for e in step["events"]]
        if ["param", "head", "wte.weight"] not in events:
            failures.append("the tied head's use of wte.weight was not recorded as a checked access by 'head'")
        if not any(e[0] == "call" and e[1] == "blocks.0.fc" for e in events):
            failures.append("a Linear using its own weight and bias was not compacted into a 'call' event")
        replay = subprocess.run([zero3, "replay", trace_path, "--ranks", "4", "--report", report_path],
                                capture_output=True, text=True)
        print(replay.stdout)
        if replay.returncode != 0:
            failures.append(f"zero3 replay exited {replay.returncode}: {replay.stderr.strip()}")
        else:
            report = json.load(open(report_path))
            if report["engine_counters"]["external_registrations"] < 1:
                failures.append("replay registered no external parameter for the tied head")
            if report["checks"]["findings"]:
                failures.append(f"replay found problems: {report['checks']['findings']}")
            # The recorder writes the tokens per micro-step, from which replay derives the flops.
            compute_s = report["time"]["steps"][-1]["compute_s"]
            if not compute_s > 0:
                failures.append(f"the demo trace predicts {compute_s} s of compute (no tokens recorded?)")
            if re.search(r"\(compute 0\.0+ ", replay.stdout):
                failures.append("the summary prints the demo's compute time as zero")
    for failure in failures:
        print("FAIL: " + failure)
    print("record_torch_trace: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
