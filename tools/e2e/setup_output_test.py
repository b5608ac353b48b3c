#!/usr/bin/env python3
"""tools/lib/build.sh's setup on a machine missing every package, with apt-get and dpkg-query
replaced by stand-ins (the real ones would install): the terminal gets a few lines however much
apt prints (its output goes to a log), the demo's list leaves out Debian's torch and the test
suite's list has it.

    tools/e2e/setup_output_test.py
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
APT_LINES = 3000


def setup(folder, test_packages):
    fake = os.path.join(folder, "bin")
    os.makedirs(fake, exist_ok=True)
    with open(os.path.join(fake, "dpkg-query"), "w") as out:
        out.write("#!/bin/sh\necho 'unknown ok not-installed'\n")
    with open(os.path.join(fake, "apt-get"), "w") as out:
        out.write(f"#!/bin/sh\ni=0; while [ $i -lt {APT_LINES} ]; do echo \"Setting up package-$i\"; i=$((i+1)); done\n")
    for name in ("dpkg-query", "apt-get"):
        os.chmod(os.path.join(fake, name), 0o755)
    env = dict(os.environ, PATH=fake + os.pathsep + os.environ["PATH"], ZERO3_PACKAGES_ONLY="1", TMPDIR=folder)
    env.pop("ZERO3_TEST_PACKAGES", None)
    if test_packages:
        env["ZERO3_TEST_PACKAGES"] = "1"
    return subprocess.run(["bash", "-c", f"source {ROOT}/tools/lib/build.sh"], env=env, capture_output=True, text=True)


def main():
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        demo = setup(folder, test_packages=False)
        suite = setup(folder, test_packages=True)
        output = (demo.stdout + demo.stderr).splitlines()
        if os.geteuid() == 0:
            if demo.returncode != 0:
                failures.append(f"setup exit {demo.returncode}: {output[-5:]}")
            if len(output) > 6:
                failures.append(f"{len(output)} lines on the terminal, at most 6 expected: {output[:10]}")
            log = os.path.join(folder, "zero3-apt.log")
            if not os.path.exists(log) or sum(1 for _ in open(log)) < APT_LINES:
                failures.append("apt's output is not in " + log)
        elif demo.returncode != 1 or "install them with: sudo apt-get install" not in demo.stderr:
            failures.append(f"not root: expected exit 1 with the command to run, got {demo.returncode}: {output[-3:]}")
        if "python3-torch" in output[0]:
            failures.append("the demo's setup installs python3-torch: " + output[0])
        if "python3-torch" not in (suite.stdout + suite.stderr):
            failures.append("the test suite's setup does not install python3-torch")
    for failure in failures:
        print("FAIL: " + failure)
    print("setup output: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
