#!/usr/bin/env python3
"""The findings tables of traces/findings/CAMPAIGNS.md, regenerated from the campaigns' reports
(`zero3 fuzz --target T --report R`) and the upstream table (traces/findings/upstream.json):
one table per report, a row per finding with its shrunk case, hits, script and upstream status,
and its mechanism as triaged (confirmed in the framework's source, or a hypothesis).

    tools/findings_table.py traces/findings/campaigns/*/report.json > traces/findings/CAMPAIGNS.md
    tools/findings_table.py fuzz-out/r.json --collect traces/findings/campaigns/deepspeed-300-seed-N

Any python3; no torch needed. A report's finding carries the id of the upstream row it matched
when the campaign ran; its status, links and mechanism are read from the table as it is now.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UPSTREAM = os.path.join(ROOT, "traces", "findings", "upstream.json")


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def upstream_cell(row, status):
    if row is None:
        return "not looked up upstream yet"
    if row["status"] == "unknown":
        return f"no upstream report found (checked {row['checked']})"
    links = ", ".join(f"[{link['url'].split('github.com/')[-1].replace('/issues/', ' #').replace('/pull/', ' PR #')}]"
                      f"({link['url']}) ({link['state']})" for link in row["upstream"])
    return f"known: {links}"


def script_cell(finding, report_dir):
    repro = finding.get("repro") or {}
    if repro.get("verified"):
        path = os.path.relpath(repro["script"], report_dir) if os.path.isabs(repro["script"]) else repro["script"]
        return f"verified, {repro.get('lines')} lines (`{path}`)"
    return "none: " + cell(repro.get("why", "not written"))[:160]


def wall_text(report):
    """The campaign's whole time (the runner's start and the scripts' verification too), which
    reports written before it was measured do not carry."""
    if "wall_seconds" not in report:
        return ""
    return f"; {report['wall_seconds']:.0f} s ({report['wall_cases_per_second']:.2f} cases/s) with the scripts verified"


def table(report, report_path, rows):
    report_dir = os.path.dirname(os.path.abspath(report_path))
    versions = ", ".join(f"{k} {v}" for k, v in report.get("versions", {}).items())
    lines = [f"### {report['target']}: {report['cases']} cases, seed {report['seed']}", "",
             f"`zero3 fuzz --target {report['target']} --cases {report['cases']} --seed {report['seed']} "
             f"--max-ranks {report['max_ranks']}{report.get('space_flags', '')}`: {len(report['findings'])} findings, "
             f"{len(report.get('flaky', []))} flaky (failed once, not when run again alone), "
             f"{report['seconds']:.0f} s ({report['cases_per_second']:.2f} cases/s){wall_text(report)}; {versions}.", "",
             "| finding | shrunk case | hits | script | upstream | mechanism |", "|---|---|---|---|---|---|"]
    for finding in report["findings"]:
        upstream = finding.get("upstream") or {}
        row = rows.get(upstream.get("id"))
        mechanism = f"{row['mechanism']} ({row['evidence'].split(':')[0]})" if row else "not triaged"
        lines.append("| " + " | ".join([
            cell(finding["signature"]), cell(finding.get("model", finding.get("shrunk", ""))), str(finding["hits"]),
            script_cell(finding, report_dir), upstream_cell(row, upstream.get("status")), cell(mechanism)]) + " |")
    for flaky in report.get("flaky", []):
        lines.append(f"\nFlaky: {cell(flaky['first']['signature'])} at case {flaky['at_case']} "
                     f"({cell(flaky['case'])}); the confirming run ({flaky['confirm_timeout_s']:.0f} s limit) "
                     f"gave {flaky['confirm']['verdict']}.")
    return "\n".join(lines) + "\n"


def collect(report_path, destination):
    """Copies a campaign's report and each finding's case.json, repro.py and ISSUE.md from its
    fuzz-out folder into `destination` (the repository's traces/findings/campaigns/NAME), the
    report's paths rewritten relative to it: what a maintainer needs, without weights or logs."""
    import shutil
    with open(report_path) as file:
        report = json.load(file)
    os.makedirs(destination, exist_ok=True)
    for finding in report["findings"]:
        source = os.path.dirname(finding["case_file"])
        target = os.path.join(destination, os.path.basename(source))
        os.makedirs(target, exist_ok=True)
        for name in ("case.json", "repro.py", "ISSUE.md"):
            if os.path.exists(os.path.join(source, name)):
                shutil.copy(os.path.join(source, name), os.path.join(target, name))
        finding["case_file"] = os.path.relpath(os.path.join(target, "case.json"), destination)
        finding["issue"] = os.path.relpath(os.path.join(target, "ISSUE.md"), destination)
        if finding.get("repro_script"):
            finding["repro_script"] = finding["repro"]["script"] = os.path.relpath(os.path.join(target, "repro.py"), destination)
    with open(os.path.join(destination, "report.json"), "w") as out:
        json.dump(report, out, indent=2)
        out.write("\n")


def triage_table(rows):
    """Every row of the upstream table: the finding, its upstream status and links, and its
    mechanism as read in the framework's source, confirmed or a hypothesis."""
    lines = ["# Findings by kind: upstream status and mechanism", "",
             "Regenerated by `tools/findings_table.py --triage > traces/findings/TRIAGE.md` from "
             "`traces/findings/upstream.json`, where each row also says how it matches findings and the evidence "
             "for its mechanism in full.", "",
             "| target | finding | upstream | mechanism | evidence |", "|---|---|---|---|---|"]
    for row in rows.values():
        evidence = row["evidence"].split(":")[0]
        lines.append("| " + " | ".join([row["target"], cell(row["title"]), upstream_cell(row, row["status"]),
                                         cell(row["mechanism"]), evidence]) + " |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="*")
    parser.add_argument("--triage", action="store_true", help="print the upstream table's rows instead: every "
                                                              "finding kind, its upstream status and mechanism")
    parser.add_argument("--upstream", default=UPSTREAM)
    parser.add_argument("--collect", metavar="DEST", help="copy the one report given, and its findings' case, "
                                                          "script and issue text, into DEST instead")
    args = parser.parse_args()
    if args.collect:
        if len(args.reports) != 1:
            parser.error("--collect takes one report")
        collect(args.reports[0], args.collect)
        return 0
    with open(args.upstream) as file:
        rows = {row["id"]: row for row in json.load(file)["findings"]}
    if args.triage:
        sys.stdout.write(triage_table(rows))
        return 0
    if not args.reports:
        parser.error("give the campaigns' reports (or --triage)")
    out = ["# Campaigns of `zero3 fuzz --target`", "",
           "Regenerated by `tools/findings_table.py traces/findings/campaigns/*/report.json`; each finding's folder",
           "beside its report holds case.json (`--replay` runs it again), the verified repro.py and ISSUE.md.", ""]
    for path in args.reports:
        with open(path) as file:
            out.append(table(json.load(file), path, rows))
    sys.stdout.write("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
