"""Content for download experiments: bulk objects and multi-object web "pages".

Everything is plain files under one directory, so quicbed's HTTP/3 server and nginx can
serve the same tree. Bytes are pseudo-random (AES-256-CTR keystream keyed by the seed and
the object's path): compression gains nothing, and the same seed gives the same bytes on
every machine and Python version. A ``manifest.json`` at the root lists what was made;
clients read it to know a page's objects::

    python -m quicbed.apps.objects --root /srv/quicbed --bulk 10MB --pages all

Page shapes are those of the studies' experiment E1b (docs/studies.md): object count and total size
in kB (1 kB = 1000 bytes). A page's objects are an HTML document first, then images,
scripts, style sheets, fonts and JSON, with sizes drawn from a log-normal law per type and
scaled to sum exactly to the page's total.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from quicbed.errors import QuicbedError, SpecError
from quicbed.spec.units import parse_size

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "quicbed-objects"
MANIFEST_VERSION = 1
KB = 1000
CHUNK = 1 << 20
MIN_OBJECT_SIZE = 64


@dataclass(frozen=True)
class PageShape:
    objects: int
    total_kb: int

    @property
    def name(self) -> str:
        return f"p{self.objects}-{self.total_kb}k"

    @property
    def total_bytes(self) -> int:
        return self.total_kb * KB


# Experiment E1b (docs/studies.md): objects / total kB.
PAGE_SHAPES: tuple[PageShape, ...] = tuple(
    PageShape(n, kb)
    for n, kb in (
        (12, 56),
        (8, 262),
        (16, 421),
        (25, 441),
        (39, 470),
        (86, 839),
        (28, 985),
        (37, 1409),
        (149, 2911),
        (134, 3560),
        (64, 3723),
    )
)


@dataclass(frozen=True)
class ObjectType:
    name: str
    extension: str
    content_type: str
    share: float  # probability of a non-document object being of this type
    median_size: float  # bytes, before scaling to the page total


DOCUMENT = ObjectType("html", "html", "text/html", 0.0, 30_000)
OBJECT_TYPES: tuple[ObjectType, ...] = (
    ObjectType("image", "jpg", "image/jpeg", 0.30, 20_000),
    ObjectType("icon", "png", "image/png", 0.15, 3_000),
    ObjectType("script", "js", "application/javascript", 0.25, 15_000),
    ObjectType("style", "css", "text/css", 0.12, 8_000),
    ObjectType("font", "woff2", "font/woff2", 0.06, 25_000),
    ObjectType("data", "json", "application/json", 0.12, 2_000),
)
SIZE_SIGMA = 1.0
CONTENT_TYPES: dict[str, str] = {
    "bin": "application/octet-stream",
    **{t.extension: t.content_type for t in (DOCUMENT, *OBJECT_TYPES)},
}


def content_type(path: str) -> str:
    return CONTENT_TYPES.get(path.rsplit(".", 1)[-1].lower(), "application/octet-stream")


# --------------------------------------------------------------------------- bytes


def pseudo_random_chunks(key_text: str, size: int, chunk: int = CHUNK) -> Iterable[bytes]:
    """``size`` deterministic pseudo-random bytes in chunks (AES-256-CTR keystream)."""
    key = hashlib.sha256(key_text.encode()).digest()
    encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    zeros = bytes(chunk)
    remaining = size
    while remaining > 0:
        take = min(chunk, remaining)
        yield encryptor.update(zeros if take == chunk else bytes(take))
        remaining -= take


def pseudo_random_bytes(key_text: str, size: int) -> bytes:
    return b"".join(pseudo_random_chunks(key_text, size))


def write_object(root: Path, path: str, size: int, seed: int) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as output:
        for chunk in pseudo_random_chunks(f"quicbed-objects:{seed}:{path}", size):
            output.write(chunk)


# --------------------------------------------------------------------------- sizes


def split_total(total: int, weights: Sequence[float], minimum: int = MIN_OBJECT_SIZE) -> list[int]:
    """Integers >= ``minimum`` proportional to ``weights`` that sum exactly to ``total``."""
    count = len(weights)
    if count == 0 or total < count * minimum:
        raise ValueError(f"cannot split {total} bytes into {count} objects of >= {minimum} bytes")
    spare = total - count * minimum
    weight_sum = float(sum(weights))
    shares = [spare * w / weight_sum for w in weights]
    sizes = [minimum + math.floor(s) for s in shares]
    leftover = total - sum(sizes)
    # largest remainders first; ties by position so the result is deterministic
    order = sorted(range(count), key=lambda i: (-(shares[i] - math.floor(shares[i])), i))
    for i in order[:leftover]:
        sizes[i] += 1
    return sizes


@dataclass(frozen=True)
class PageObject:
    path: str
    size: int
    type: str
    content_type: str


def plan_page(shape: PageShape, seed: int) -> list[PageObject]:
    """The objects of one page: deterministic given the shape and seed."""
    rng = random.Random(f"quicbed-page:{seed}:{shape.name}")
    types = [DOCUMENT]
    shares = [t.share for t in OBJECT_TYPES]
    types += rng.choices(OBJECT_TYPES, weights=shares, k=shape.objects - 1)
    weights = [rng.lognormvariate(math.log(t.median_size), SIZE_SIGMA) for t in types]
    sizes = split_total(shape.total_bytes, weights)
    width = max(3, len(str(shape.objects - 1)))
    return [
        PageObject(
            path=f"/pages/{shape.name}/{i:0{width}d}-{t.name}.{t.extension}",
            size=size,
            type=t.name,
            content_type=t.content_type,
        )
        for i, (t, size) in enumerate(zip(types, sizes, strict=True))
    ]


def bulk_name(size: int) -> str:
    for unit, scale in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


# --------------------------------------------------------------------------- tree


def parse_pages(text: str) -> list[PageShape]:
    """'all', or comma-separated 'OBJECTS/KB' shapes or page names: '12/56,p8-262k'."""
    if text.strip().lower() == "all":
        return list(PAGE_SHAPES)
    shapes = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        named = [s for s in PAGE_SHAPES if s.name == item]
        if named:
            shapes.append(named[0])
            continue
        count, sep, kb = item.partition("/")
        if not sep or not count.isdigit() or not kb.isdigit() or int(count) < 1:
            raise SpecError(
                f"cannot read page shape {item!r}",
                field="pages",
                fix="write OBJECTS/KB like 12/56, a name like p12-56k, or 'all'",
            )
        shapes.append(PageShape(int(count), int(kb)))
    return shapes


def generate(
    root: str | Path, *, bulk: Iterable[int] = (), pages: Iterable[PageShape] = (), seed: int = 0
) -> dict[str, Any]:
    """Write the objects and ``manifest.json`` under ``root``; return the manifest."""
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "seed": seed,
        "kb": KB,
        "bulk": [],
        "pages": [],
    }
    for size in bulk:
        if size < 0:
            raise SpecError(f"negative bulk size {size}", field="bulk")
        path = f"/bulk/{bulk_name(size)}.bin"
        write_object(base, path, size, seed)
        manifest["bulk"].append(
            {"name": bulk_name(size), "path": path, "size": size, "content_type": CONTENT_TYPES["bin"]}
        )
    for shape in pages:
        try:
            objects = plan_page(shape, seed)
        except ValueError as error:
            raise SpecError(str(error), field=f"pages.{shape.name}") from None
        for item in objects:
            write_object(base, item.path, item.size, seed)
        manifest["pages"].append(
            {
                "name": shape.name,
                "count": shape.objects,
                "total_bytes": shape.total_bytes,
                "objects": [
                    {"path": o.path, "size": o.size, "type": o.type, "content_type": o.content_type} for o in objects
                ],
            }
        )
    (base / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def load_manifest(path: str | Path) -> dict[str, Any]:
    """Read a manifest (the file, or the directory holding ``manifest.json``)."""
    target = Path(path)
    if target.is_dir():
        target = target / MANIFEST_NAME
    try:
        manifest = json.loads(target.read_text(encoding="utf-8"))
    except OSError as error:
        raise SpecError(f"cannot read manifest: {error.strerror}", source=str(target)) from None
    except json.JSONDecodeError as error:
        raise SpecError(f"not valid JSON: {error.msg}", source=f"{target}:{error.lineno}") from None
    if manifest.get("format") != MANIFEST_FORMAT:
        raise SpecError(
            "not a quicbed objects manifest",
            source=str(target),
            fix="generate content with python -m quicbed.apps.objects",
        )
    return manifest


def page_objects(manifest: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The objects of page ``name`` (a page name, or a bulk object's name)."""
    for page in manifest.get("pages", []):
        if page["name"] == name:
            return list(page["objects"])
    for item in manifest.get("bulk", []):
        if item["name"] == name:
            return [item]
    known = [p["name"] for p in manifest.get("pages", [])]
    known += [b["name"] for b in manifest.get("bulk", [])]
    raise SpecError(
        f"no page or bulk object named {name!r} in the manifest",
        field="page",
        fix=f"choose one of {', '.join(known) or '(none generated)'}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.objects",
        description="Generate bulk objects and web pages (plain files + manifest.json).",
    )
    parser.add_argument("--root", required=True, help="directory to fill (served as /)")
    parser.add_argument(
        "--bulk", action="append", default=[], metavar="SIZE", help="a bulk object, e.g. 10MB (repeatable)"
    )
    parser.add_argument("--pages", default="", metavar="SHAPES", help="'all' (the E1b pages) or e.g. '12/56,86/839'")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        manifest = generate(
            args.root,
            bulk=[parse_size(s, "bulk") for s in args.bulk],
            pages=parse_pages(args.pages) if args.pages else [],
            seed=args.seed,
        )
    except QuicbedError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    total = sum(b["size"] for b in manifest["bulk"]) + sum(p["total_bytes"] for p in manifest["pages"])
    print(f"{len(manifest['bulk'])} bulk objects, {len(manifest['pages'])} pages, {total} bytes under {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
