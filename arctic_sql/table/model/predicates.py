"""pyiceberg's row predicates, as the functions of a column name they are.

pyiceberg's predicate classes are pydantic models whose own ``__init__`` takes ``(term, literal)`` by
position; type checkers see the keyword-only ``__init__`` pydantic makes from their fields instead.
The classes are named here once, typed as the calls pyiceberg documents (``EqualTo("id", 1)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from pyiceberg import expressions as ie

Unary = Callable[[str], ie.BooleanExpression]
Binary = Callable[[str, Any], ie.BooleanExpression]

is_null = cast(Unary, ie.IsNull)
not_null = cast(Unary, ie.NotNull)
equal_to = cast(Binary, ie.EqualTo)
greater_than = cast(Binary, ie.GreaterThan)
greater_than_or_equal = cast(Binary, ie.GreaterThanOrEqual)
less_than = cast(Binary, ie.LessThan)
less_than_or_equal = cast(Binary, ie.LessThanOrEqual)
starts_with = cast(Binary, ie.StartsWith)
is_in = cast(Callable[[str, Iterable[Any]], ie.BooleanExpression], ie.In)
not_equal_to = cast(Binary, ie.NotEqualTo)
