"""The verdicts as a table: on the terminal, and in docs/conformance.md between two markers."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from .compare import ASPECT_TITLES, ASPECTS, Cell
from .known import KNOWN
from .run import RunResult

BEGIN = "<!-- differential:begin (written by `python -m conformance --write-docs`) -->"
END = "<!-- differential:end -->"
_KNOWN = {k.id: k for k in KNOWN}


def cell_text(cell: Cell) -> str:
    if cell.state == "same":
        return "="
    if cell.state == "n/a":
        return "—"
    if cell.state == "explained":
        return "≠ " + " ".join(cell.explained_by)
    return "✗ " + " ".join(cell.explained_by)


def summary(result: RunResult) -> str:
    lines = []
    width = max(len(c.case.name) for c in result.cases) if result.cases else 10
    lines.append(f"{'case':{width}}  " + " ".join(f"{a[:10]:10}" for a in ASPECTS))
    for res in result.cases:
        cells = " ".join(f"{cell_text(res.cells[a])[:10]:10}" for a in ASPECTS)
        flag = "  ERROR" if any(r.error for r in res.records.values()) else ""
        lines.append(f"{res.case.name:{width}}  {cells}{flag}")
    for profile, cell in result.controller_metrics.items():
        lines.append(f"controller metrics ({profile}): {cell_text(cell)}")
    for res in result.cases:
        for side, rec in res.records.items():
            if rec.error:
                lines.append(f"\n{res.case.name} [{side}] error: {rec.error}")
            for wait in rec.waits:
                lines.append(f"\n{res.case.name} [{side}] wait: {wait}")
        for aspect, cell in res.cells.items():
            if cell.state == "unexplained":
                after = cell.explained_by or "nothing"
                lines.append(f"\n--- {res.case.name}: {aspect} (after {after}) ---\n{cell.diff}")
    for profile, cell in result.controller_metrics.items():
        if cell.state == "unexplained":
            lines.append(f"\n--- controller metrics ({profile}) ---\n{cell.diff}")
    used = sorted({k for res in result.cases for c in res.cells.values() for k in c.explained_by}
                  | {k for c in result.controller_metrics.values() for k in c.explained_by})
    lines.append("")
    for key in used:
        entry = _KNOWN[key]
        lines.append(f"{key}: {'deliberate' if entry.deliberate else 'fixed'} — {entry.title}")
    total = len(result.cases) * len(ASPECTS)
    same = sum(1 for res in result.cases for c in res.cells.values() if c.state == "same")
    explained = sum(1 for res in result.cases for c in res.cells.values() if c.state == "explained")
    lines.append(f"\n{len(result.cases)} cases × {len(ASPECTS)} aspects = {total} cells: {same} same, "
                 f"{explained} different and explained, {result.unexplained} unexplained; "
                 f"{result.seconds:.0f}s (run {result.run_id})")
    return "\n".join(lines)


def table(result: RunResult) -> str:
    head = "| case | covers | " + " | ".join(ASPECT_TITLES[a] for a in ASPECTS) + " |"
    rule = "| --- | --- | " + " | ".join("---" for _ in ASPECTS) + " |"
    rows = [head, rule]
    for res in result.cases:
        cells = " | ".join(cell_text(res.cells[a]) for a in ASPECTS)
        profile = f" ({res.case.profile})" if res.case.profile != "default" else ""
        rows.append(f"| `{res.case.name}`{profile} | {res.case.title} | {cells} |")
    return "\n".join(rows)


def _used(result: RunResult) -> list[str]:
    return sorted({k for res in result.cases for c in res.cells.values() for k in c.explained_by}
                  | {k for c in result.controller_metrics.values() for k in c.explained_by}, key=lambda k: int(k[1:]))


def docs_section(result: RunResult, swap: Any | None, *, complete: bool, when: str) -> str:
    cells = [c for res in result.cases for c in res.cells.values()]
    same = sum(1 for c in cells if c.state == "same")
    explained = sum(1 for c in cells if c.state == "explained")
    empty = sum(1 for c in cells if c.state == "n/a")
    lines = [
        f"Last run {when}: {len(result.cases)} cases × {len(ASPECTS)} aspects = {len(cells)} cells: **{same} same, "
        f"{explained} different and explained, {empty} with nothing to compare, {result.unexplained} unexplained**; "
        f"corpus {result.seconds:.0f} s" + (f", swap {swap.seconds:.0f} s" if swap is not None else "") + ".",
        "",
        "`=` same · `≠ Dn` different, explained by the deliberate difference Dn below · `—` neither controller "
        "produced anything of that aspect in that case · `✗` unexplained (the run fails).",
        "",
        table(result),
        "",
        "Controller-wide metric families (names, label names, bucket bounds): "
        + ", ".join(f"{p}: {cell_text(c)}" for p, c in result.controller_metrics.items()) + ".",
        "",
        "Deliberate differences the run shows (`conformance/known.py`; each rewrites both records only in the "
        "way it explains, so any other difference in the same cell still fails the run):",
        "",
    ]
    for key in _used(result):
        entry = _KNOWN[key]
        lines.append(f"- **{key}** — {entry.title} ([{entry.doc.split('#')[0].removeprefix('docs/')}]"
                     f"({entry.doc.removeprefix('docs/')}))")
    if swap is not None:
        lines += ["", "The swap (`conformance/swap.py`):", ""]
        lines += [f"- {step}" for step in swap.steps]
        lines += [f"- **FAILED**: {failure}" for failure in swap.failures]
        digests = swap.findings.get("digests", {})
        verdicts = sorted({v for per in digests.values() for v in per.values()})
        lines.append("- after each swap: the same inventories and revisions, no object re-created, pruned or "
                     "written, the same field managers on the same fields, no Warning event; build digests: "
                     + (", ".join(verdicts) if verdicts else "not compared"))
        crd = swap.findings.get("crd", {})
        old_read = str(crd.get("a v1beta2 read after the rollback")).rsplit(": ", 1)[-1]
        if crd:
            lines.append(f"- the CRD: `storedVersions` {crd.get('storedVersions before the rollback')} with ours', "
                         f"{crd.get('storedVersions after the rollback')} after upstream's was re-applied (served "
                         f"then: {crd.get('served after upstream' + chr(39) + 's CRD is re-applied')}); an object "
                         f"written in `v1beta2` reads in `v1` with its `patchesStrategicMerge` as `spec.patches` "
                         f"and the annotations {crd.get('v1beta2 object read in v1', {}).get('annotations')}, and "
                         f"upstream applies it ({crd.get('the v1beta2 patchesStrategicMerge under upstream')}); a "
                         f"`v1beta2` read then answers \"{old_read}\"; "
                         f"`spec.conversion` keeps ours' webhook until docs/deploy.md's reset, which is accepted "
                         f"({crd.get('docs/deploy.md' + chr(39) + 's conversion reset')})")
        lines.append(f"- {'passed both ways' if not swap.failures else 'failed'}")
    if not complete:
        lines += ["", "(a partial run: only the cases above)"]
    return "\n".join(lines)


def write_docs(result: RunResult, swap: Any | None, path: Path, *, complete: bool) -> None:
    text = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path}: no {BEGIN} … {END} markers")
    when = time.strftime("%Y-%m-%d", time.gmtime())
    body = docs_section(result, swap, complete=complete, when=when)
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{body}\n{END}", text))


def swap_summary(swap: Any) -> str:
    lines = ["", "swap:"]
    lines += [f"  {step}" for step in swap.steps]
    for key, value in swap.findings.items():
        lines.append(f"  {key}: {json.dumps(value, indent=1, default=str)}")
    lines += [f"  FAILED: {failure}" for failure in swap.failures]
    lines.append(f"  {'passed' if not swap.failures else f'{len(swap.failures)} failures'} in {swap.seconds:.0f}s")
    return "\n".join(lines)
