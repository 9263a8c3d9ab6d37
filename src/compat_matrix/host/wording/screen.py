"""The first screen in words: a title that is the answer, the caution, the grid's cells, legend and reasons (a Fix's
change among them), and the deprecations line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from compat_matrix.host.breaks import NBSP
from compat_matrix.host.conclude import COULD_NOT_RUN, DIFFERENTLY, HARMFUL, NEEDED, ORPHANED, REDUNDANT, UNKNOWN
from compat_matrix.host.overrides import OverrideConclusions
from compat_matrix.host.verdict import INSPECTS
from compat_matrix.host.wording.style import MARKDOWN, PLAIN, Style, listed
from compat_matrix.host.wording.versions import versions_text
from compat_matrix.probes import plain_words
from compat_matrix.shared.vocabulary import AdviceKind, ConclusionKind, Status

VERBS = {  # what asks for work, in the order a title says it
    AdviceKind.FIX: "fix",
    AdviceKind.DELETE: "delete",
    AdviceKind.PORT: "port",
    AdviceKind.REVIEW: "review",
}
MEANINGS = {
    HARMFUL: "errors with the override, runs without it",
    NEEDED: "runs with the override, errors without it",
    DIFFERENTLY: "values differ with and without it",
    ORPHANED: "transformers no longer defines, calls or reads it",
    UNKNOWN: "no probe showed either way",
    COULD_NOT_RUN: "the cell or class failed",
    REDUNDANT: "deleting it changes nothing",
}
CAUTIONS = 3  # harmful overrides a caution line names; the grid shows the rest
ERROR_SHOWN = 200  # characters of an error in the caution line
UNBUILT = f"{Status.COULD_NOT_BUILD}: "  # a subject's status and reason, as a conclusion's why
UNBUILDABLE = "CouldNotBuild:"  # the error of a probe that could not build the class (compat_matrix.cell.tiny)
INSTALL_FAILED = f"{Status.INSTALL_FAILED}: "  # a cell's


def _class(target: str) -> str:
    return target.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def name_of_subject(target: str, style: Style = MARKDOWN) -> str:
    """`CharacterCausalLMWrapper`, the class of a `module:Class` target."""
    return style.code(_class(target))


def name_of(override: OverrideConclusions, several: bool, style: Style = MARKDOWN) -> str:
    """`name`, or with several subjects `Class.name` (a subject with nothing audited: its class)."""
    owner = _class(override.target)
    if not override.name:
        return style.code(owner)
    return style.code(f"{owner}.{override.name}" if several else override.name)


def title(name: str, overrides: Sequence[OverrideConclusions], style: Style = MARKDOWN) -> str:
    """`CharacterCausalLMWrapper: delete 2 of 3 overrides`: the actions, by advice (keeping asks for none)."""
    audited = [o for o in overrides if o.name]
    if not audited:
        return f"{name}: nothing audited"
    if all(o.advice.nothing_ran for o in audited):
        return f"{name}: nothing ran"
    if len(audited) == 1:
        (only,) = audited
        return f"{name}: {str(only.advice.kind).lower()} {style.code(only.name)}"
    every = "both" if len(audited) == 2 else f"all {len(audited)}"
    counts = {kind: sum(o.advice.kind == kind for o in audited) for kind in VERBS}
    parts = [f"{VERBS[kind]} {count}" for kind, count in counts.items() if count]
    if not parts:
        return f"{name}: keep {every} overrides"
    alone = [kind for kind, count in counts.items() if count == len(audited)]
    if alone:
        return f"{name}: {VERBS[alone[0]]} {every} overrides"
    return f"{name}: {listed(parts)} of {len(audited)} overrides"


def spoken(titles: Sequence[str]) -> list[str]:
    """Probe titles as the first screen says them: in the plain words of each probe (`@probe(plain=…)`), each once;
    a title no registered probe has (an older result, a probe from elsewhere) as it is."""
    words = plain_words()
    return list(dict.fromkeys(words.get(title, title) for title in titles))


def _failing(override: OverrideConclusions, kind: ConclusionKind) -> tuple[list[str], list[str], str | None]:
    """The releases where `override` is `kind` (newest first), the probes whose contrasts of that kind show it on
    the newest of them (in plain words; those that run the class before those that only read it), and their first
    error."""
    labels = [label for label, c in override.by_release if c.kind == kind]
    if not labels:
        return [], [], None
    conclusion = dict(override.by_release)[labels[0]]
    ours = [c for c in conclusion.contrasts if c.kind == kind]
    contrasts = sorted(ours, key=lambda c: c.observation.probe in INSPECTS)
    return labels, spoken([c.title for c in contrasts]), next((c.error for c in contrasts if c.error), None)


def caution(
    overrides: Sequence[OverrideConclusions],
    order: Sequence[str],
    several: bool,
    style: Style = MARKDOWN,
    above: frozenset[str] = frozenset(),
    fails: str = "",
) -> str:
    """One line when an override is harmful somewhere: what breaks, the error, and that deleting it fixes that.
    Overrides that break alike (the same error on the same releases) are said together. An error in `above` (the
    release's health at the top says it) is named by its type alone. `fails`: the `--fail-on` value that harmful
    reaches (`harmful`), said in the line's head so that no other line says it again."""
    alike: dict[tuple[tuple[str, ...], str | None], tuple[list[str], list[str]]] = {}
    cautioned: dict[tuple[tuple[str, ...], str | None], list[str | None]] = {}  # their caveats (stand-ins, …)
    for o in overrides:
        if o.harmful:
            labels, titles, error = _failing(o, HARMFUL)
            names, seen = alike.setdefault((tuple(labels), error), ([], []))
            names.append(name_of(o, several, style))
            seen += [t for t in titles if t not in seen]
            cautioned.setdefault((tuple(labels), error), []).append(o.advice.caveat)
    if not alike:
        return ""
    said = []
    for (labels, error), (names, titles) in list(alike.items())[:CAUTIONS]:
        who = (
            listed(names[:CAUTIONS]) if len(names) <= CAUTIONS else f"{', '.join(names[:2])} and {len(names) - 2} more"
        )
        verb = "breaks" if len(names) == 1 else "break"
        what = listed([style.text(t) for t in titles[:3]]) + (" and more" if len(titles) > 3 else "")
        raised = f" with “{style.text(error[:ERROR_SHOWN])}”" if error and error not in above else ""
        raised += f" with the {style.text(error.split(':', 1)[0])} said at the top" if error and error in above else ""
        raised += "".join(dict.fromkeys(f" ({style.text(c)})" for c in cautioned.get((labels, error), ()) if c))
        said.append(f"on {versions_text(labels, order)}, {who} {verb} {what}{raised}")
    more = len(alike) - CAUTIONS
    fix = "deleting it fixes that there" if sum(o.harmful for o in overrides) == 1 else "deleting each fixes that there"
    head = style.strong("Caution") + f" (fails the run: {style.code('--fail-on ' + fails)}):" if fails else ""
    return (
        f"{head or style.strong('Caution:')} "
        + "; ".join(said)
        + (f"; and {more} more (✗ in the grid)" if more > 0 else "")
        + f"; {fix}."
    )


def cell(kind: ConclusionKind) -> str:
    """A grid cell: the conclusion's symbol and word, which wrap as one."""
    return f"{kind.symbol}{NBSP}{kind}"


def legend(kinds: Sequence[ConclusionKind]) -> str:
    """Each symbol the grid shows, defined once."""
    return " · ".join(f"{kind.symbol}{NBSP}{kind}: {MEANINGS[kind]}" for kind in kinds)


def stopped(whys: Sequence[str]) -> str | None:
    """Of why a subject could not run on each release (`status: reason`), the one to say first: a class that could
    not be built, then one that could not be imported or crashed, then a cell that could not be installed; a reason
    that says what failed (`could not build X: …`, `could not import the factory …`) without its status."""
    ranked = sorted(whys, key=lambda why: (not why.startswith(UNBUILT), why.startswith(INSTALL_FAILED)))
    if not ranked:
        return None
    _, _, said = ranked[0].partition(": ")
    return said if said.startswith("could not ") else ranked[0]


def reason(
    override: OverrideConclusions, order: Sequence[str], style: Style = MARKDOWN, above: Mapping[str, str] | None = None
) -> str:
    """The advice's reason in a few words, for the grid (and, plain, the JSON). `above`: for each reason a row could
    not run that the release's health at the top says, what to say instead (compat_matrix.host.health)."""
    advice = override.advice

    def on(kind: ConclusionKind) -> str:
        return versions_text(advice.on(kind), order, axis=False)

    if advice.nothing_ran:
        told = [above[c.why] for _, c in override.by_release if above and c.why in above]
        if told:
            return f"nothing ran: {told[0]}"
        why = stopped([c.why for _, c in override.by_release if c.why])
        return style.text(why[:ERROR_SHOWN]) if why else "nothing ran"
    if advice.kind == AdviceKind.DELETE:
        _, _, error = _failing(override, HARMFUL)
        if not advice.on(HARMFUL):
            return "deleting it changes nothing"
        fixed = f"the {style.text(error.split(':', 1)[0])}" if error else "what breaks"
        return f"fixes {fixed} on {on(HARMFUL)}" + ("; elsewhere changes nothing" if advice.on(REDUNDANT) else "")
    if advice.kind == AdviceKind.KEEP and not advice.on(NEEDED):
        _, titles, _ = _failing(override, DIFFERENTLY)
        what = listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        said = f"it does its job: deleting it changes {what or 'what it does'} on {on(DIFFERENTLY)}"
        coupled = [label for label, c in override.by_release if c.coupled]
        if coupled:  # alone it loses a contract; with the other overrides it changes nothing there
            together = versions_text(coupled, order, axis=False)
            said += f" (deleting it with the other overrides changes nothing on {together})"
        own = _own(override)
        if own:  # it turns some input down itself: that refusal is its own decision, said for review
            said += _own_error(own, style)
        elsewhere = [f"changes nothing on {on(REDUNDANT)}" if advice.on(REDUNDANT) else ""]
        elsewhere += [f"not established on {on(UNKNOWN)}" if advice.on(UNKNOWN) else ""]
        return "; ".join([said, *filter(None, elsewhere)])
    if advice.kind == AdviceKind.KEEP:
        _, titles, error = _failing(override, NEEDED)
        what = listed([style.text(t) for t in titles[:2]]) or "a probe"
        raised = (
            f"{'raises' if len(titles) == 1 else 'raise'} {style.text(error.split(':', 1)[0])}" if error else "fail"
        )
        harmful = f"; harmful on {on(HARMFUL)}" if advice.on(HARMFUL) else ""
        if error and error.startswith(UNBUILDABLE):  # every probe that builds it raises: say why once
            _, _, why = error.partition(": could not build ")
            why = why.partition(": ")[2].split("; write a factory")[0]
            return f"without it, the class cannot be built{f' ({style.text(why)})' if why else ''}{harmful}"
        return f"without it, {what} {raised}{harmful}"
    if advice.kind == AdviceKind.FIX:
        return fix_text(override, order, style)
    if advice.kind == AdviceKind.PORT:
        first = advice.on(ORPHANED)[-1]
        why = dict(override.by_release)[first].why
        since = versions_text([first], order, axis=False)
        return f"orphaned from {since}" + (f" ({style.text(why)})" if why else "") + ": port what it did"
    if advice.caveat:
        kinds = [f"{k} on {on(k)}" for k in (REDUNDANT, HARMFUL) if advice.on(k)]
        return f"{'; '.join(kinds)}, but {style.text(advice.caveat)}"
    ran = {kind for kind, _ in advice.releases} - {COULD_NOT_RUN}
    if advice.on(COULD_NOT_RUN) and ran <= {REDUNDANT, HARMFUL, ORPHANED}:
        kinds = [f"{k} on {on(k)}" for k in (REDUNDANT, HARMFUL, ORPHANED) if advice.on(k)]
        return f"{'; '.join(kinds)}, but it could not run on {on(COULD_NOT_RUN)}: delete it once it runs there"
    if override.untested and ran <= {REDUNDANT, HARMFUL, ORPHANED}:
        kinds = [f"{k} on {on(k)}" for k in (REDUNDANT, HARMFUL) if advice.on(k)]
        return f"{'; '.join(kinds)}, {unaudited(override.untested, order)}"
    said = []
    if advice.on(HARMFUL) and advice.on(NEEDED):
        said.append(f"harmful on {on(HARMFUL)}, needed on {on(NEEDED)}")
    elif advice.on(HARMFUL):
        said.append(f"harmful on {on(HARMFUL)}")
    broken = [(label, c.breaks) for label, c in override.by_release if c.breaks]
    if broken:  # what no correct override does: said as what it breaks, where
        titles = spoken([b.title for b in broken[0][1]])
        what = listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        said.append(f"breaks {what} on {versions_text([label for label, _ in broken], order, axis=False)}")
    elif advice.on(DIFFERENTLY) and (site := unbound_site(override)):  # a call site in transformers no run showed
        said.append(
            f"on {on(DIFFERENTLY)} transformers calls {style.code(_shape(site))} at {style.text(_at(site))}, which it"
            " cannot take: accept what it passes"
        )
    elif advice.on(DIFFERENTLY):
        _, titles, _ = _failing(override, DIFFERENTLY)
        what = listed([style.text(t) for t in titles[:2]]) + (" …" if len(titles) > 2 else "")
        said.append(f"behaves differently on {on(DIFFERENTLY)}" + (f" ({what})" if what else ""))
    own = _own(override)
    if own and said:  # what raised as shipped is a refusal of its own: the maintainer decides whether it still holds
        said[-1] += _own_error(own, style)
    if advice.on(UNKNOWN):
        said.append(f"not established on {on(UNKNOWN)}")
    if set(advice.on(ORPHANED)) - set(override.untested):  # a release audited it and uses it no more: say where
        said.append(f"orphaned on {on(ORPHANED)}")
    return "; ".join(said) or "review it"


GENERIC_CALLS = frozenset({"forward", "__call__"})  # names transformers calls on objects of every kind


def _own(override: OverrideConclusions) -> tuple[int, str] | None:
    """The override's own `raise` (or lookup) that raised as shipped on the newest release where one did."""
    return next((c.raised_by_it for _, c in override.by_release if c.raised_by_it), None)


def _own_error(own: tuple[int, str], style: Style) -> str:
    """What raised as shipped, said as the override's own: a refusal (`raise ValueError(`), or a lookup of a key
    what it was given lacked (`kwargs["attention_mask"]`)."""
    line, text = own
    if not text.startswith("raise "):
        return (
            f" (the KeyError is its own: {style.code(text)} at line {line} reads a key it was not given;"
            " review what it needs)"
        )
    raised = text.removeprefix("raise ").split("(")[0].strip()
    return (
        f" (it raises the {style.text(raised)} itself: {style.code(text)} at line {line}; review whether that"
        " refusal still holds)"
    )


def unbound_site(override: OverrideConclusions) -> str | None:
    """Where only the probes that read the class tell it apart from the base on the newest release it behaves
    differently on, and transformers' calls of it there include one it cannot bind: the first such call (gliner's
    `create_optimizer(self)`, which transformers 5.3+ calls as `create_optimizer(model)` where it delays creating
    the optimizer); else None. Never for `forward`: transformers calls the `forward` of many objects that are not
    the model (a CUDA kernel's in activations.py), so a site that passes it what it cannot take names no caller of
    this override."""
    if override.name in GENERIC_CALLS:
        return None
    labels, _, _ = _failing(override, DIFFERENTLY)
    contrasts = dict(override.by_release)[labels[0]].contrasts if labels else ()
    if not contrasts or any(c.observation.probe not in INSPECTS for c in contrasts):
        return None
    calls = [c.observation.override for c in contrasts if c.observation.probe == "transformers_calls"]
    return next((str(v["cannot_take"][0]) for v in calls if isinstance(v, dict) and v.get("cannot_take")), None)


def unaudited(releases: Sequence[str], order: Sequence[str], one: bool = True) -> str:
    """Why a name that changes nothing where it ran is not Delete: the releases that define it nowhere never ran
    without it (`releases`, oldest first)."""
    it = "it" if one else "them"
    return (
        f"but no class of transformers defines {it} on {versions_text(releases, order, axis=False)}, where deleting"
        f" {it} never ran: delete {it} if nothing of yours reads {it} there"
    )


def fix_text(override: OverrideConclusions, order: Sequence[str], style: Style = MARKDOWN) -> str:
    """The change a Fix proposes and whether it was verified: `accept `missing_keys`, `recompute_mapping` and pass
    them on; on 5.0.0, 5.24.0 transformers calls `tie_weights(missing_keys=…, recompute_mapping=…)` at
    modeling_utils.py:4628;
    verified: with it the class runs on 5.0.0, 5.24.0 (build and init_weights), and elsewhere nothing passes it what it
    cannot take`: the probes named are those the `fixed` variant ran in."""
    broken = [(label, c.fix) for label, c in override.by_release if c.fix is not None]
    ran = [label for label, c in override.by_release if c.kind != COULD_NOT_RUN and c.fix is None]
    where = versions_text([label for label, _ in broken], order, axis=False)
    names = sorted({p for _, fix in broken for p in fix.parameters})
    accepted = listed([style.code(n) if " " not in n else n for n in names])
    sites = next((fix.sites for _, fix in broken if fix.sites), ())
    called = (
        f"; on {where} transformers calls {style.code(_shape(sites[0]))} at {style.text(_at(sites[0]))}"
        if sites
        else ""
    )
    more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
    kwargs = style.code("**kwargs")
    them = "it" if len(names) == 1 else "them"
    passes_on = all(fix.passes_on for _, fix in broken)
    change = f"accept {accepted} (or {kwargs}){f' and pass {them} on' if passes_on else ''}{called}{more}"
    failed = [(label, fix) for label, fix in broken if fix.verified is False]
    untried = [label for label, fix in broken if fix.verified is None]
    if failed:
        label, fix = failed[0]
        at = versions_text([label], order, axis=False)
        return f"{change}; not verified: with it, {style.text(fix.still or 'it')} on {at}"
    if untried:
        return f"{change}; not verified on {versions_text(untried, order, axis=False)}: the change was not run there"
    elsewhere = f", and on {versions_text(ran, order, axis=False)} nothing passes it what it cannot take" if ran else ""
    probes = spoken([p for _, fix in broken for p in fix.probes])
    tried = f" ({listed([style.text(p) for p in probes])})" if probes else ""
    return f"{change}; verified: with it the class runs on {where}{tried}{elsewhere}"


def _shape(site: str) -> str:
    return site.partition(" at ")[0]


def _at(site: str) -> str:
    return site.partition(" at ")[2]


def deprecated_line(
    overrides: Sequence[OverrideConclusions], order: Sequence[str], several: bool, style: Style = MARKDOWN
) -> str:
    """`Deprecated in transformers 5.24.0: `a` (use `b`), `c`.`: every deprecated audited name, on one line; with
    several subjects, a name deprecated alike in several classes is said once, naming them."""
    since: dict[str, dict[tuple[str, str | None], list[str]]] = {}
    for o in overrides:
        if o.deprecated is not None:
            owners = since.setdefault(o.deprecated.since, {}).setdefault((o.name, o.deprecated.replacement), [])
            owners.append(name_of_subject(o.target, PLAIN))
    said = []
    for label, names in since.items():
        parts = []
        for (name, replacement), owners in names.items():
            use = f" (use {style.code(replacement)})" if replacement else ""
            shown = listed(owners[:3]) if len(owners) <= 3 else f"{', '.join(owners[:2])} and {len(owners) - 2} more"
            parts.append(f"{style.code(name)}{use}" + (f" in {style.text(shown)}" if several else ""))
        said.append(f"in {versions_text([label], order)}: {'; '.join(parts) if several else ', '.join(parts)}")
    return f"Deprecated {'; '.join(said)}." if said else ""
