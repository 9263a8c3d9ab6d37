"""What an import that failed needs, in words and pins: the distribution of a module Python could not find, what the
package imports or builds with without declaring it, and two installed distributions that clash (with the pin that
takes a release from before the cap)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from compat_matrix.host import distributions, envs, package_index
from compat_matrix.host.spec import DECLARED
from compat_matrix.host.starter.start import Found, Start
from compat_matrix.shared.blame import Clash

# Import names that are not their distribution's name (most are: `datasets`, `einops`)
DISTRIBUTIONS = {
    "sklearn": "scikit-learn",
    "yaml": "PyYAML",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "google.protobuf": "protobuf",
    "jwt": "PyJWT",
    "Levenshtein": "levenshtein",
    "fitz": "PyMuPDF",
    "dotenv": "python-dotenv",
}


def distribution_of(module: str) -> str | None:
    """The distribution that most likely provides `module`, a module Python could not find; None where only a
    submodule is missing (`transformers.models.foo`, `torch.distributed.tensor`): Python names the first part that
    is missing, so the package it belongs to is installed, and installing it again changes nothing."""
    if module in DISTRIBUTIONS:
        return DISTRIBUTIONS[module]
    return None if "." in module else module.replace("_", "-")


def undeclared(found: Found, metadata: distributions.Metadata, installs: Sequence[str]) -> list[tuple[str, str]]:
    """(distribution, why) for each module that a top-level module of the package fails to import for
    (ModuleNotFoundError) and that the package does not require (extras aside) nor the matrix installs: what the
    package itself cannot be imported without. A submodule's missing module is an optional integration's: left out."""
    asked = envs.asked(installs)
    out: dict[str, str] = {}
    for discovery in found.discoveries:
        for module, reason in discovery.skipped:
            hit = _MISSING.search(reason)
            if module != discovery.target or not reason.startswith("ModuleNotFoundError") or not hit:
                continue
            dist = distribution_of(hit.group(1))
            if dist is None or canonicalize_name(dist) in asked:
                continue
            if distributions.declared_by(metadata.requires, dist) is not None:
                continue
            extras = distributions.declared_for(metadata.requires, dist)
            said = f"declares only for its extra {', '.join(extras)}" if extras else "does not declare"
            who = f"{metadata.name} {metadata.version or ''}".strip()
            out.setdefault(dist, f"{module} imports {hit.group(1)} ({reason}), which {who} {said}")
    return list(out.items())


def build_needs(found: Found, metadata: distributions.Metadata, installs: Sequence[str]) -> list[tuple[str, str]]:
    """(distribution, why) for each module that a class found could not be built without (cell.needs: a NameError
    for what the library imports from it only when it is installed, an ImportError, a message naming an extra's
    requirement) and that the matrix does not install: what an extra of the package provides."""
    asked = envs.asked(installs)
    who = f"{metadata.name} {metadata.version or ''}".strip()
    out: dict[str, str] = {}
    for item in found.unbuilt:
        dist = distribution_of(item.needs) if item.needs else None
        if (
            dist is None
            or canonicalize_name(dist) in asked
            or distributions.declared_by(metadata.requires, dist) is not None
        ):
            continue
        extras = distributions.declared_for(metadata.requires, dist)
        said = f"declares only for its extra {', '.join(extras)}" if extras else "does not declare"
        name = item.target.rsplit(":", 1)[-1]
        error = item.reason.removeprefix(f"could not build {name}: ").split("; ")[0]
        out.setdefault(dist, f"{name} cannot be built without {item.needs} ({error}), which {who} {said}")
    return list(out.items())


def clash_lines(found: Found, metadata: distributions.Metadata) -> list[str]:
    """A line per top-level module that failed inside another distribution's code beside a third: both named with
    their installed versions, and the pin to write."""
    lines = []
    for discovery in found.discoveries:
        for module, reason in discovery.skipped:
            if module == discovery.target and module in found.clashes:
                lines.append(clash_line(module, reason, found.clashes[module], metadata))
    return lines


def clash_line(module: str, reason: str, clash: Clash, metadata: distributions.Metadata) -> str:
    """`could not import hf_olmo: pyarrow 26.0.1 fails beside numpy 1.26.4 (…); ai2-olmo 0.6.0 requires numpy<2:
    pin an older pyarrow …`. Where the package's own requirements fix the version of the other distribution, the
    one that raised has to move (an older release); else either may: a newer one of the one that raised, or an
    older one of the other."""
    (name, version), beside = clash.raised_in, clash.beside
    who = f"{metadata.name} {metadata.version or ''}".strip()
    others = ", ".join(f"{n} {v}" for n, v in beside)
    pinned = [(n, distributions.declared_by(metadata.requires, n)) for n, _ in beside]
    fixed = [f"{n}{spec}" for n, spec in pinned if capped(spec)]
    older = f'"{name}<{version}"'
    said = f"could not import {module}: {name} {version} fails beside {others} ({reason})"
    if fixed:
        pin = f"pin an older {name} in extra_requirements ({older}, lower until it imports)"
        return f"{said}; {who} requires {', '.join(fixed)}: {pin}"
    first, first_version = beside[0]
    back = f'"{first}<{first_version}"'
    return f'{said}: pin one in extra_requirements: "{name}>{version}" (a newer {name}) or {back} (an older {first})'


def capped(specifier: str | None) -> bool:
    """Whether a declared requirement holds its distribution back from newer releases (`<2`, `==1.26.4`)."""
    return bool(specifier) and any(s.operator in ("<", "<=", "==", "~=", "===") for s in SpecifierSet(specifier))


def clash_fix(
    clash: Clash, metadata: distributions.Metadata, uploads_of: Callable[[str], package_index.Uploads]
) -> tuple[str, str] | None:
    """Where the package's own requirements cap a distribution that the one that raised fails beside (ai2-olmo's
    numpy<2, pyarrow 26.0.1 requiring NumPy 2): (the pin, why) that takes a release of the one that raised from
    before the first release the cap excludes (numpy 2.0.0, 2024-06-16: "pyarrow<17", 17.0.0 came after), which
    cannot need what did not exist yet. None where nothing caps the other, or the upload times do not say."""
    name = clash.raised_in[0]
    who = f"{metadata.name} {metadata.version or ''}".strip()
    for other, version in clash.beside:
        cap = distributions.declared_by(metadata.requires, other)
        if not capped(cap):
            continue
        uploads = uploads_of(other)
        try:
            installed = Version(version)
        except InvalidVersion:  # a local build's own version string: nothing to compare releases with
            continue
        excluded = [v for v in uploads if not v.is_prerelease and v > installed and v not in SpecifierSet(cap)]
        if not excluded or uploads.get(min(excluded)) is None:
            continue
        first, when = min(excluded), uploads[min(excluded)]
        assert when is not None
        after = [v for v, at in uploads_of(name).items() if at is not None and at > when and not v.is_prerelease]
        if not after:
            continue
        pin = f"{name}<{min(after)}"
        why = (
            f"{name} {clash.raised_in[1]} fails beside {other} {version}, and {who} requires {other}{cap}: a {name} "
            f"from before {other} {first} ({when.date()})"
        )
        return pin, why
    return None


def declared_hint(transformers: tuple[str, ...], declared: str | None, name: str) -> str:
    """Where the releases asked for (`--transformers`) leave out what the package declares: how to test its own
    range too, and see where it breaks beyond it."""
    if not transformers or not declared or DECLARED in transformers:
        return ""
    asked = " ".join(f"--transformers {value}" for value in transformers)
    return f" ({name} declares transformers{declared}: --transformers declared {asked} tests that range too)"


def nothing_found(found: Found, start: Start | None = None) -> str:
    """Why nothing to audit was found: each module that could not be imported (with its clash, where one), and the
    `--extra` that adds what they import without declaring it."""
    clashes = found.clashes if start is not None else {}
    skipped = [
        clash_line(m, why, clashes[m], start.metadata)
        if start is not None and m in clashes
        else f"could not import {m} ({why})"
        for d in found.discoveries
        for m, why in d.skipped
    ]
    said = "; ".join(skipped) if skipped else "no class to audit"
    reasons = [why for d in found.discoveries for _, why in d.skipped]
    missing = sorted({d for why in reasons if (m := _MISSING.search(why)) and (d := distribution_of(m.group(1)))})
    hint = f" (if it imports {', '.join(missing)} without declaring it: --extra {' --extra '.join(missing)})"
    return said + (hint if missing else "")


_MISSING = re.compile(r"No module named '([\w.]+)'")


def skipped_line(module: str, why: str, metadata: distributions.Metadata) -> str:
    """`colpali_engine.trainer: ModuleNotFoundError: No module named 'datasets'`, and where the package declares
    that module's distribution for an extra, the requirement that installs it, by the extra that requires least
    (init adds it only for the package's top-level modules: undeclared): `… (colpali-engine declares datasets for
    its extras all, train: require colpali-engine[train] to audit it)`."""
    hit = _MISSING.search(why)
    dist = distribution_of(hit.group(1)) if hit and why.startswith("ModuleNotFoundError") else None
    extras = distributions.declared_for(metadata.requires, dist) if dist else []
    if not extras:
        return f"{module}: {why}"
    size = {e: sum(f"extra == '{e}'" in line.replace('"', "'") for line in metadata.requires) for e in extras}
    smallest = min(extras, key=lambda extra: size[extra])  # the extra that installs the least beside it
    return (
        f"{module}: {why} ({metadata.name} declares {dist} for its extra{'s' * (len(extras) > 1)}"
        f" {', '.join(extras)}: require {metadata.name}[{smallest}] to audit it)"
    )


def unimported_line(module: str, why: str, found: Found, metadata: distributions.Metadata) -> str:
    """`hf_olmo: ImportError: …`, or where two installed distributions clash in its import, the clash and its pin."""
    clash = found.clashes.get(module)
    return clash_line(module, why, clash, metadata) if clash else f"{module}: {why}"
