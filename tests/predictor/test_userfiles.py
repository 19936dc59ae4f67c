"""The one reader of small user files: every failure is one line naming the file, the field and the error type."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from predictor.errors import ConfigError, InputError
from predictor.userfiles import MAX_BYTES, MAX_DEPTH, read_as, read_structured, validate_as


class _Knobs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    every_s: float = Field(60.0, gt=0)


def test_read_as_validates_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "k.yaml").write_text("name: a\nevery_s: 5\n")
    (tmp_path / "k.json").write_text('{"name": "b"}')
    assert read_as(_Knobs, tmp_path / "k.yaml", "knobs", ConfigError) == _Knobs(name="a", every_s=5)
    assert read_as(_Knobs, tmp_path / "k.json", "knobs", ConfigError) == _Knobs(name="b")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: a\nevery_s: 0\n", "invalid knobs {path}: every_s: Input should be greater than 0"),
        ("name: a\nspeed: 1\n", "invalid knobs {path}: speed: Extra inputs are not permitted"),
        ("every_s: 1\n", "invalid knobs {path}: name: Field required"),
        ("- a\n", "invalid knobs {path}: knobs: Input should be a valid dictionary"),
        ("name: [\n", "knobs {path} is not valid YAML"),
    ],
)
def test_read_as_errors_are_one_line_in_the_callers_type(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "k.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_as(_Knobs, path, "knobs", InputError)
    assert needle.format(path=path) in str(info.value)
    assert "\n" not in str(info.value)


def test_validate_as_names_the_source_it_is_given() -> None:
    with pytest.raises(ConfigError, match=r"^invalid knobs inline: every_s: "):
        validate_as(_Knobs, {"name": "a", "every_s": -1}, "knobs", "inline", ConfigError)


@pytest.mark.timeout(10)
def test_a_billion_laughs_document_is_walked_once_per_object(tmp_path: Path) -> None:
    """Aliases share one object among 9^9 places: the depth check visits each object once, so it ends."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    data = read_structured(path, "settings", ConfigError)
    assert len(data) == 10


def test_the_size_is_refused_from_metadata_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_BYTES["settings"] + 1)
    with pytest.raises(ConfigError, match=r"is 16 MiB, above the 16 MiB limit for a settings file"):
        read_structured(path, "settings", ConfigError)


def test_depth_is_counted_in_containers(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    read_structured(path, "settings", ConfigError)  # exactly MAX_DEPTH levels: accepted
    path.write_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    with pytest.raises(ConfigError, match=rf"nested deeper than {MAX_DEPTH} levels"):
        read_structured(path, "settings", ConfigError)
