"""JSON values shared read-only: a tool's offered schema is listed for every turn, and
each listing used to copy every schema so a caller changing one could not change the
next (issue 37: 14 schemas parsed again per turn). Now the one copy is frozen instead:
a change in place raises TypeError, so a caller that means to change one takes its own
copy (``dict(x)``, ``copy.deepcopy(x)``, both ordinary again).

``FrozenDict`` and ``FrozenList`` are ``dict`` and ``list``: they compare equal to
ordinary ones, and ``json`` and pydantic read them as such.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

REFUSAL = "a shared JSON value (a tool's offered schema) is read-only: change a copy of it"


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(REFUSAL)


class FrozenDict(dict[str, Any]):
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> Any:
        return (dict, (self.__deepcopy__({}),))


class FrozenList(list[Any]):
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> Any:
        return (list, (self.__deepcopy__({}),))


def frozen(value: Any) -> Any:
    """``value`` (JSON: dicts, lists, scalars) with every dict and list frozen, anew."""
    if isinstance(value, dict):
        return FrozenDict({key: frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList(frozen(item) for item in value)
    return value
