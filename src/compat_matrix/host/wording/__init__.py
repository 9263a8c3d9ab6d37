"""Conclusions and advice in words: sentences from the structured conclusions of compat_matrix.host.conclude, in the
escaping of one output format (`Style`). Pure functions, one module per part of the report:

    style       how each format writes a sentence (MARKDOWN, PLAIN), observed values spelled and shortened
    versions    runs of neighbouring releases (`transformers 4.57.6, 5.16.1–5.24.0 (9 releases)`), the glance
    sentences   a sentence per conclusion, the recommendation, a subject's summary
    screen      the first screen: the title, the caution, the grid's cells, legend and reasons, deprecations
    evidence    what differs per override, for the evidence tables
    context     what a package target stood for, whether a declared range is honest

`MARKDOWN` marks code with backticks and emphasis with asterisks and quotes observed text (errors, reasons, names a
user's probe chose) with markdown's emphasis and link characters escaped, as the report's sentences have always
read, in the markdown and in the JSON's sentences alike; render then escapes HTML and `|` for the markdown alone.
`PLAIN` is the same sentences as plain text, for readers that are not markdown.

What the report reads is named here too (`wording.reason`, `wording.PLAIN`).
"""

from compat_matrix.host.wording.context import found_line, range_line
from compat_matrix.host.wording.evidence import Evidence, alike, left_out, what_differs
from compat_matrix.host.wording.screen import (
    caution,
    cell,
    deprecated_line,
    fix_text,
    legend,
    name_of,
    name_of_subject,
    reason,
    stopped,
    title,
    unaudited,
)
from compat_matrix.host.wording.sentences import (
    Summary,
    advice_why,
    deprecated,
    line,
    lines,
    needing,
    phrase,
    probe_titles,
    recommend,
    shipped_lines,
    summarize,
    told_nothing,
)
from compat_matrix.host.wording.style import MARKDOWN, PLAIN, Style, listed, short, sides, spelled
from compat_matrix.host.wording.versions import glance, stretches, versions_text

__all__ = [
    "MARKDOWN",
    "PLAIN",
    "Evidence",
    "Style",
    "Summary",
    "advice_why",
    "alike",
    "caution",
    "cell",
    "deprecated",
    "deprecated_line",
    "fix_text",
    "found_line",
    "glance",
    "left_out",
    "legend",
    "line",
    "lines",
    "listed",
    "name_of",
    "name_of_subject",
    "needing",
    "phrase",
    "probe_titles",
    "range_line",
    "reason",
    "recommend",
    "shipped_lines",
    "short",
    "sides",
    "spelled",
    "stopped",
    "stretches",
    "summarize",
    "title",
    "told_nothing",
    "unaudited",
    "versions_text",
    "what_differs",
]
