"""from_fields: one record from another that shares its field names."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from rag_service.records import from_fields


@dataclass
class Target:
    a: int
    b: str
    c: list[int] = field(default_factory=list)
    d: float = 0.5


class Source:
    a = 1
    b = "x"
    extra = "ignored"


def test_shared_names_are_copied_given_values_win_and_defaults_stay() -> None:
    assert from_fields(Target, Source(), b="y") == Target(a=1, b="y", c=[], d=0.5)


def test_a_required_field_missing_from_both_names_it() -> None:
    with pytest.raises(TypeError, match=r"Target\.b is required and object has no such field"):
        from_fields(Target, object(), a=1)


def test_a_mapping_source_gives_its_keys_as_the_fields() -> None:
    """A row's ``_asdict()``: keys are read as attributes are, and an attribute of the mapping itself is not."""
    assert from_fields(Target, {"a": 1, "b": "x", "extra": 2, "d": 0.25}) == Target(a=1, b="x", d=0.25)
    assert from_fields(Target, {"a": 1, "b": "x", "c": [3]}, b="y") == Target(a=1, b="y", c=[3])
    with pytest.raises(TypeError, match=r"Target\.b is required and dict has no such field"):
        from_fields(Target, {"a": 1, "items": 2})
