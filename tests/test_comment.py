"""The report against a baseline, as the pull request's comment (compat_matrix.host.since): one line when nothing
changed, the changed rows first when something did, each fact once, the rest collapsed; rendered through a
GitHub-flavoured markdown renderer. On the default matrix's results made by hand (tests/test_gate.py's)."""

from __future__ import annotations

import copy

from compat_matrix.host import cut, render
from compat_matrix.host.report import make_report
from compat_matrix.host.spec import load
from compat_matrix.shared.results import CellResult
from compat_matrix.shared.vocabulary import ConclusionKind
from test_gate import DEFAULT, RELEASES
from test_golden import wrapper_cell
from test_markdown import gfm, source_tables, unwrapped

HARMFUL, NEEDED = ConclusionKind.HARMFUL, ConclusionKind.NEEDED
SINCE = "reports/char-causal-lm-checkpointing.json"


def default_results() -> list[CellResult]:
    spec = load(DEFAULT)
    from compat_matrix.host.cells import cells

    out = []
    for cell in cells(spec):
        version = RELEASES[cell.requested["transformers"]]
        resolved = {"python": "3.11.7", "transformers": version, "torch": "2.13.0+cpu"}
        out.append(CellResult(cell.matrix, cell.id, cell.requested, resolved, subjects=(wrapper_cell(version),)))
    return out


def comment(baseline: dict | None, fail_on=(HARMFUL,)) -> str:
    return render.markdown(make_report(load(DEFAULT), default_results(), baseline, fail_on, since=SINCE))


def committed() -> dict:
    """The report as main has it: the JSON of the same results."""
    return render.report_json(make_report(load(DEFAULT), default_results()))


def turned_harmful() -> dict:
    """A baseline in which gradient_checkpointing_enable was redundant on 5.24.0, as on 5.14.1."""
    old = copy.deepcopy(committed())
    cells = {c["release"]: c for c in old["cells"]}
    cells["transformers=5.24.0"]["subjects"] = copy.deepcopy(cells["transformers=5.14.1"]["subjects"])
    for o in old["overrides"]:
        if o["name"] == "gradient_checkpointing_enable":
            o["by_release"]["transformers=5.24.0"] = "redundant"
    return old


def before_collapsed(text: str) -> str:
    return text.split("\n<details>", 1)[0]


def test_an_unchanged_baseline_gives_one_line_under_600_bytes_and_the_report_collapsed():
    text = comment(committed())
    top = before_collapsed(text)
    assert len(top.encode()) < 600
    assert top.strip() == (
        f"# No change since `{SINCE}` — CharacterCausalLMWrapper: delete 2 of 3 overrides, 1 harmful on 5.24.0, "
        "fails `--fail-on harmful`"
    )
    whole = render.markdown(make_report(load(DEFAULT), default_results(), fail_on=(HARMFUL,)))
    body = whole.split("\n", 2)[2]  # below the title
    summary = f"{render.since.WHOLE_REPORT}, the grid, the evidence and the versions</summary>"
    assert text == f"{top}\n{summary}\n\n{body}</details>\n"
    parsed = gfm(text)
    assert parsed.details == 0 and len(parsed.tables) == len(source_tables(text)) >= 2  # every table renders


def test_one_override_turned_harmful_leads_with_its_row_and_says_it_once():
    text = comment(turned_harmful())
    top = before_collapsed(text)
    assert source_tables(top) == [
        [
            "| override | transformers | was | now | advice |",
            "|---|---|---|---|---|",
            "| `gradient_checkpointing_enable` | 5.24.0 | = redundant | ✗ harmful | **Delete**: fixes the TypeError on "
            "5.24.0; elsewhere changes nothing |",
        ]
    ]
    assert top.startswith(
        f"# CharacterCausalLMWrapper: delete 2 of 3 overrides\n\n**Changed since `{SINCE}`** (fails the run):\n"
    )
    assert "Fails the run" not in top and "Caution" not in top  # the row says it: harmful on 5.24.0, once
    assert top.count("harmful") == 1
    collapsed = text[len(top) :]
    assert collapsed.startswith("\n<details><summary>1 observation changed</summary>\n\n- observation appeared: ")
    assert f"{render.since.WHOLE_REPORT}, as it stands" in collapsed
    assert "| `get_input_embeddings` | + needed | + needed |" in unwrapped(collapsed)  # the full grid, collapsed
    assert gfm(text).details == 0


def test_a_fail_on_conclusion_the_rows_do_not_say_keeps_its_line():
    text = comment(turned_harmful(), fail_on=(HARMFUL, NEEDED))
    top = before_collapsed(text)
    assert top.count("**Fails the run** (`--fail-on harmful,needed`): ") == 1
    line = next(x for x in top.splitlines() if x.startswith("**Fails the run**"))
    assert "get\\_input\\_embeddings: needed on" in line and "harmful" not in line.split(": ", 1)[1]


def test_without_a_baseline_the_caution_says_that_harmful_fails_the_run_and_no_other_line_repeats_it():
    text = render.markdown(make_report(load(DEFAULT), default_results(), fail_on=(HARMFUL, NEEDED)))
    first = text.split("\n<details>", 1)[0]
    assert "**Caution** (fails the run: `--fail-on harmful`): on transformers 5.24.0" in first
    fails = next(x for x in first.splitlines() if x.startswith("**Fails the run**"))
    assert "get\\_input\\_embeddings: needed" in fails and "harmful on" not in fails


def test_a_cut_comment_closes_what_it_opened():
    text = comment(turned_harmful())
    for limit in (len(text.encode()) - 10, 3000, 1200, 500):
        short = cut.truncate(text, limit)
        assert len(short.encode()) <= limit and short.count("<details>") == short.count("</details>"), limit
        assert short.startswith("# CharacterCausalLMWrapper: delete 2 of 3 overrides\n")
