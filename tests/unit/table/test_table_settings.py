"""The typed settings are generated from the property registry and read what it declares."""

from __future__ import annotations

import pytest

from arctic_sql.errors import InvalidArgumentError
from arctic_sql.table.model import properties, settings_codegen
from arctic_sql.table.model.table_settings import TableSettings


def test_the_generated_module_is_up_to_date_with_the_registry():
    # After a change to properties.PROPERTIES: python -m arctic_sql.table.model.settings_codegen
    assert settings_codegen.TARGET.read_text(encoding="utf-8") == settings_codegen.source()


def test_every_registry_key_has_one_typed_attribute():
    names = {settings_codegen.attribute(p.key) for p in properties.PROPERTIES}
    assert len(names) == len(properties.PROPERTIES)
    defaults = TableSettings({})
    for p in properties.PROPERTIES:
        assert getattr(defaults, settings_codegen.attribute(p.key)) == p.default


def test_stored_values_are_parsed_to_the_declared_type():
    s = TableSettings(
        {
            "self-optimizing.target-size": "1024",
            "self-optimizing.quota": "2",
            "self-optimizing.enabled": "false",
            "merge-on-read.in-memory-max-bytes": "0",
        }
    )
    assert (s.target_size, s.quota, s.enabled, s.merge_on_read_in_memory_max_bytes) == (1024, 2.0, False, 0)
    assert isinstance(s.quota, float) and s.fragment_ratio == 8


def test_a_bad_stored_value_names_the_key():
    with pytest.raises(InvalidArgumentError, match="'self-optimizing.fragment-ratio'"):
        _ = TableSettings({"self-optimizing.fragment-ratio": "many"}).fragment_ratio
