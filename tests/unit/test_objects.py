"""Generated content: exact sizes and counts, determinism, manifest."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from quicbed.apps import objects
from quicbed.errors import SpecError

BRIEF_SHAPES = [
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
]


def test_page_shapes_are_those_of_experiment_e1b() -> None:
    assert [(s.objects, s.total_kb) for s in objects.PAGE_SHAPES] == BRIEF_SHAPES


@pytest.mark.parametrize("shape", objects.PAGE_SHAPES, ids=lambda s: s.name)
def test_planned_pages_have_exact_counts_and_totals(shape: objects.PageShape) -> None:
    planned = objects.plan_page(shape, seed=0)
    assert len(planned) == shape.objects
    assert sum(o.size for o in planned) == shape.total_kb * 1000
    assert min(o.size for o in planned) >= objects.MIN_OBJECT_SIZE
    assert planned[0].type == "html" and planned[0].path.endswith(".html")
    assert len({o.path for o in planned}) == shape.objects
    if shape.objects >= 25:
        assert len({o.type for o in planned}) >= 4  # mixed types


def test_pages_are_deterministic_per_seed() -> None:
    shape = objects.PAGE_SHAPES[5]
    assert objects.plan_page(shape, 1) == objects.plan_page(shape, 1)
    assert objects.plan_page(shape, 1) != objects.plan_page(shape, 2)


def test_split_total_is_exact() -> None:
    assert objects.split_total(1000, [1, 1, 1]) == [334, 333, 333]
    assert sum(objects.split_total(56_000, [0.3, 7.1, 2.2, 9.9], minimum=64)) == 56_000
    with pytest.raises(ValueError):
        objects.split_total(100, [1, 1], minimum=64)


def test_generate_tree_and_manifest(tmp_path: Path) -> None:
    manifest = objects.generate(tmp_path, bulk=[2_000_000, 1234], pages=objects.parse_pages("12/56,p8-262k"), seed=7)
    assert [b["path"] for b in manifest["bulk"]] == ["/bulk/2MB.bin", "/bulk/1234B.bin"]
    assert (tmp_path / "bulk/2MB.bin").stat().st_size == 2_000_000
    assert (tmp_path / "bulk/1234B.bin").stat().st_size == 1234
    loaded = objects.load_manifest(tmp_path)
    assert loaded == manifest
    for page in loaded["pages"]:
        files = sorted((tmp_path / "pages" / page["name"]).iterdir())
        assert len(files) == page["count"] == len(page["objects"])
        assert sum(f.stat().st_size for f in files) == page["total_bytes"]
        for item in page["objects"]:
            assert (tmp_path / item["path"].lstrip("/")).stat().st_size == item["size"]
    assert [o["path"] for o in objects.page_objects(loaded, "p12-56k")][0].endswith("-html.html")
    assert objects.page_objects(loaded, "2MB")[0]["size"] == 2_000_000
    with pytest.raises(SpecError, match="p12-56k"):
        objects.page_objects(loaded, "p1-1k")


def test_bytes_are_deterministic_and_incompressible(tmp_path: Path) -> None:
    first = objects.pseudo_random_bytes("k", 3 * objects.CHUNK + 5)
    assert len(first) == 3 * objects.CHUNK + 5
    assert first == objects.pseudo_random_bytes("k", 3 * objects.CHUNK + 5)
    assert first[:100] != objects.pseudo_random_bytes("other", 100)
    assert len(zlib.compress(first[:200_000])) > 199_000
    # the same seed and path give the same file on every machine
    objects.write_object(tmp_path, "/x.bin", 64, seed=3)
    assert (tmp_path / "x.bin").read_bytes().hex()[:16] == objects.pseudo_random_bytes(
        "quicbed-objects:3:/x.bin", 8
    ).hex()


def test_parse_pages() -> None:
    assert objects.parse_pages("all") == list(objects.PAGE_SHAPES)
    assert objects.parse_pages("3/10") == [objects.PageShape(3, 10)]
    with pytest.raises(SpecError, match="OBJECTS/KB"):
        objects.parse_pages("twelve")


def test_cli(tmp_path: Path) -> None:
    assert objects.main(["--root", str(tmp_path), "--bulk", "100kB", "--pages", "12/56"]) == 0
    assert (tmp_path / "bulk/100kB.bin").stat().st_size == 100_000
    assert objects.main(["--root", str(tmp_path), "--pages", "1000/1"]) == 2
