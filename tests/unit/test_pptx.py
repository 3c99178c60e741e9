"""PowerPoint files: slides as sections under their titles, in reading order, with tables, groups and notes."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from rag_service.errors import DocumentReadError
from rag_service.ingest.chunkers import make_chunker, recommend_strategy
from rag_service.ingest.formats.pdftext import PAGE_BREAK, with_pages
from rag_service.ingest.loaders import load_document
from tests.documents import make_pptx

MB = 1_000_000

DECK: list[dict[str, object]] = [
    {
        "title": "Q3 roadmap",
        "bullets": [(0, "Ship the search page"), (1, "with filters"), (0, "# of users doubles")],
        "notes": "Say that filters come first.\nThen dates.",
    },
    {"bullets": [(0, "An untitled slide")], "table": [["Plan", "Price"], ["Team", "$20"], ["", ""]]},
    {"title": "Grouped", "group": ["Left box", "Right box"]},
]


def test_slides_are_sections_in_reading_order_with_tables_groups_and_notes(tmp_path: Path) -> None:
    loaded = load_document(make_pptx(tmp_path / "deck.pptx", DECK), max_bytes=MB)
    assert loaded.title == "Q3 roadmap"  # no core title: the first slide's
    assert loaded.text.split(PAGE_BREAK) == [
        "# Q3 roadmap\n\nShip the search page\n  with filters\n\\# of users doubles\n\n"
        "Notes: Say that filters come first.\nThen dates.",
        "# Slide 2\n\nAn untitled slide\n\nPlan | Price\nTeam | $20",  # an empty row is left out
        "# Grouped\n\nLeft box\nRight box",
    ]
    assert load_document(make_pptx(tmp_path / "t.pptx", DECK, title="Roadmap"), max_bytes=MB).title == "Roadmap"


def test_a_chunk_of_a_deck_carries_its_slides_as_pages_and_its_title_as_header(tmp_path: Path) -> None:
    text = load_document(make_pptx(tmp_path / "deck.pptx", DECK), max_bytes=MB).text
    assert recommend_strategy("deck.pptx") == "markdown"
    chunks = with_pages(text, make_chunker("markdown", min_chunk_chars=10).split(text).chunks)
    by_header = {c.headers.get("h1"): c for c in chunks}
    assert by_header["Grouped"].metadata == {"page_start": 3, "page_end": 3}
    assert by_header["Q3 roadmap"].metadata["page_start"] == 1


def test_an_unreadable_deck_is_one_line_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "broken.pptx"
    broken.write_bytes(b"PK\x03\x04" + b"\x00not a zip" * 30)
    with pytest.raises(DocumentReadError) as refused:
        load_document(broken, max_bytes=MB)
    assert str(refused.value) == (
        f"{broken} is not a readable PowerPoint presentation (not a zip archive, as a .pptx is); re-save it as .pptx"
    )
    other = tmp_path / "other.pptx"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("hello.txt", "no package here")
    with pytest.raises(DocumentReadError, match=r"other\.pptx is not a readable PowerPoint presentation \("):
        load_document(other, max_bytes=MB)


def test_a_deck_unpacking_past_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    slides: list[dict[str, object]] = [{"title": f"Slide {i}", "bullets": [(0, "word " * 5000)]} for i in range(40)]
    path = make_pptx(tmp_path / "big.pptx", slides)
    with zipfile.ZipFile(path) as archive:
        unpacked = sum(info.file_size for info in archive.infolist())
    limit = unpacked // 6
    assert path.stat().st_size < limit, "precondition: the file is within the limit, its parts are not"
    with pytest.raises(DocumentReadError) as refused:
        load_document(path, max_bytes=limit)
    assert str(refused.value) == (
        f"{path} unpacks to {unpacked:,} bytes, over 5 x the limit of {limit:,} bytes (RAG_MAX_FILE_BYTES); "
        "set it higher to index it"
    )


def test_footer_date_and_slide_number_placeholders_are_left_out(tmp_path: Path) -> None:
    from pptx import Presentation

    footer = "ACME Corp, internal use only"
    slides: list[dict[str, object]] = [
        {"title": f"Policy {n}", "bullets": [(0, f"Rule {n}")], "footer": footer} for n in (1, 2)
    ]
    path = make_pptx(tmp_path / "policy.pptx", slides)
    shown = [shape.text_frame.text for shape in Presentation(str(path)).slides[1].placeholders]
    assert shown == ["Policy 2", "March 2024", footer, "2"], "precondition: on the slide"
    assert load_document(path, max_bytes=MB).text.split(PAGE_BREAK) == ["# Policy 1\n\nRule 1", "# Policy 2\n\nRule 2"]


def test_hidden_slides_are_left_out_and_the_others_keep_their_numbers(tmp_path: Path) -> None:
    slides: list[dict[str, object]] = [
        {"title": f"Topic {n}", "bullets": [(0, f"Point number {n}.")]} for n in range(1, 6)
    ]
    slides[3] = {"title": "Superseded costs", "bullets": [(0, "Storage: $48,000 a month")], "hidden": True}
    text = load_document(make_pptx(tmp_path / "deck.pptx", slides), max_bytes=MB).text
    assert "48,000" not in text and "Superseded" not in text
    assert text.split(PAGE_BREAK)[3] == "", "a hidden slide is an empty page"
    chunks = with_pages(text, make_chunker("markdown", min_chunk_chars=10).split(text).chunks)
    pages = {c.headers.get("h1"): (c.metadata["page_start"], c.metadata["page_end"]) for c in chunks}
    assert pages == {"Topic 1": (1, 1), "Topic 2": (2, 2), "Topic 3": (3, 3), "Topic 5": (5, 5)}
    first_hidden = [{"title": "Draft title", "hidden": True}, {"title": "Shown title"}]
    assert load_document(make_pptx(tmp_path / "d.pptx", first_hidden), max_bytes=MB).title == "Shown title"


def test_a_pictures_alt_text_is_a_line_of_its_slide_and_its_file_name_is_not(tmp_path: Path) -> None:
    slides: list[dict[str, object]] = [
        {"title": "Topology", "picture": "Diagram: two availability zones,\neach with three ingest workers"},
        {"picture": "Photo of the team at the Q3 offsite in Lisbon"},  # a slide with a picture alone
        {"title": "Logo", "picture": ""},  # its description is the image's file name
        {"title": "Auto", "picture": "A screenshot of a dashboard\n\nDescription automatically generated"},
        {"title": "Both", "picture": ("Zones", "Zone A holds the primary")},
        {"title": "Named", "picture": "Picture 2"},  # the shape's own name
    ]
    path = make_pptx(tmp_path / "deck.pptx", slides)
    assert 'descr="image.png"' in zipfile.ZipFile(path).read("ppt/slides/slide3.xml").decode(), "precondition"
    assert load_document(path, max_bytes=MB).text.split(PAGE_BREAK) == [
        "# Topology\n\nImage: Diagram: two availability zones, each with three ingest workers",
        "# Slide 2\n\nImage: Photo of the team at the Q3 offsite in Lisbon",
        "# Logo",
        "# Auto\n\nImage: A screenshot of a dashboard",  # PowerPoint's note on its own guess is no description
        "# Both\n\nImage: Zones: Zone A holds the primary",
        "# Named",
    ]


def test_a_chart_is_read_as_its_title_axes_and_a_line_per_series(tmp_path: Path) -> None:
    latency = {
        "title": "p95 latency rose to 240 ms in August",
        "categories": ["July", "August", "September"],
        "series": {"p95 (ms)": (182, 240, 150.5), "# of slow queries": (40, 41, None)},  # None: no point
        "axes": ("Month", "Latency (ms)"),
    }
    share = {"kind": "PIE", "categories": ["EU", "US"], "series": {"Share": (0.4, 0.6)}}  # no title, no axes
    revenue = {"categories": {"2023": ["Q3", "Q4"], "2024": ["Q1"]}, "series": {"Revenue": (1.5, 2, 2.25)}}
    slides: list[dict[str, object]] = [
        {"title": "Latency", "chart": latency},
        {"title": "Traffic", "chart": share},
        {"title": "Revenue", "chart": revenue},  # two levels of categories: each point says both
    ]
    path = make_pptx(tmp_path / "deck.pptx", slides)
    assert load_document(path, max_bytes=MB).text.split(PAGE_BREAK) == [
        "# Latency\n\nChart: p95 latency rose to 240 ms in August\nAxes: Month, Latency (ms)\n"
        "p95 (ms): July 182, August 240, September 150.5\n\\# of slow queries: July 40, August 41",
        "# Traffic\n\nShare: EU 0.4, US 0.6",
        "# Revenue\n\nRevenue: 2023 Q3 1.5, 2023 Q4 2, 2024 Q1 2.25",
    ]
    # python-pptx reads no 3-D chart, and its Series.values raises on a point a linked worksheet left as #N/A: the
    # chart is read all the same, that point left out
    damaged = tmp_path / "3d.pptx"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(damaged, "w") as out:
        for info in source.infolist():
            part = source.read(info)
            if info.filename == "ppt/charts/chart1.xml":
                part = part.replace(b"c:barChart>", b"c:bar3DChart>").replace(b"<c:v>240</c:v>", b"<c:v>#N/A</c:v>")
            out.writestr(info, part)
    assert "\np95 (ms): July 182, September 150.5\n" in load_document(damaged, max_bytes=MB).text


@pytest.mark.parametrize("default", ["PowerPoint Presentation", "Untitled presentation", "Presentation1"])
def test_a_template_default_core_title_is_not_the_decks_title(tmp_path: Path, default: str) -> None:
    assert load_document(make_pptx(tmp_path / "t.pptx", DECK, title=default), max_bytes=MB).title == "Q3 roadmap"
    untitled: list[dict[str, object]] = [{"bullets": [(0, "One point"), (0, "Another point")]}]
    assert load_document(make_pptx(tmp_path / "plan.pptx", untitled, title=default), max_bytes=MB).title == "plan"


def test_an_untitled_first_slides_one_line_top_text_is_its_heading_and_the_decks_title(tmp_path: Path) -> None:
    postmortem: list[dict[str, object]] = [
        {"bullets": [(0, "Postmortem: ingest outage of 14 August")], "table": [["Impact", "3 hours"]]},
        {"title": "Timeline", "bullets": [(0, "09:12 node image upgrade starts")]},
        {"bullets": [(0, "A later slide's top line")], "table": [["Owner", "SRE"]]},  # only the first slide's
    ]
    loaded = load_document(make_pptx(tmp_path / "p.pptx", postmortem), max_bytes=MB)
    assert loaded.title == "Postmortem: ingest outage of 14 August"
    pages = loaded.text.split(PAGE_BREAK)
    assert pages[0] == "# Postmortem: ingest outage of 14 August\n\nImpact | 3 hours"
    assert pages[2] == "# Slide 3\n\nA later slide's top line\n\nOwner | SRE"
    # more than one line on top is no title: the slide stays Slide 1, the deck takes the first slide title
    prose: list[dict[str, object]] = [{"bullets": [(0, "Impact: 3 hours"), (0, "Cause: a wiped cache")]}, postmortem[1]]
    loaded = load_document(make_pptx(tmp_path / "q.pptx", prose), max_bytes=MB)
    assert (loaded.title, loaded.text.split(PAGE_BREAK)[0]) == (
        "Timeline",
        "# Slide 1\n\nImpact: 3 hours\nCause: a wiped cache",
    )
    # the first slide shown: a hidden slide before it does not count
    hidden_first = [{"title": "Draft", "hidden": True}, postmortem[0]]
    loaded = load_document(make_pptx(tmp_path / "r.pptx", hidden_first), max_bytes=MB)
    assert loaded.text.split(PAGE_BREAK) == ["", "# Postmortem: ingest outage of 14 August\n\nImpact | 3 hours"]
