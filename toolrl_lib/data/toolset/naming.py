"""Naming styles for functions and parameters, and the reverse: a name back to its words.

Our prompt formats carry a call's name as a JSON string (``{"name": ...}``), so any
non-empty string parses; we still keep to names an OpenAI-style tool API accepts
(letters, digits, ``_``, ``.``) so the data transfers: no spaced or hyphenated names.
``words_of`` undoes every style, which the contamination check needs to compare our names
with BFCL's whatever their spelling.
"""

from __future__ import annotations

import re

STYLES = ("snake", "camel", "pascal", "dotted", "dotted_camel")


def snake(words: list[str]) -> str:
    """Words joined by underscores.

    >>> snake(["get", "honey", "harvest"])
    'get_honey_harvest'
    """
    return "_".join(words)


def camel(words: list[str]) -> str:
    """First word lower case, the rest capitalised.

    >>> camel(["get", "honey", "harvest"])
    'getHoneyHarvest'
    """
    return words[0] + "".join(w.capitalize() for w in words[1:])


def pascal(words: list[str]) -> str:
    """Every word capitalised.

    >>> pascal(["get", "honey", "harvest"])
    'GetHoneyHarvest'
    """
    return "".join(w.capitalize() for w in words)


def function_name(words: list[str], style: str, namespace: str) -> str:
    """A function name in ``style`` (``dotted*`` styles prefix the namespace).

    >>> function_name(["get", "hive"], "dotted", "apiary"), function_name(["get", "hive"], "dotted_camel", "apiary")
    ('apiary.get_hive', 'apiary.getHive')
    """
    if style == "snake":
        return snake(words)
    if style == "camel":
        return camel(words)
    if style == "pascal":
        return pascal(words)
    if style == "dotted":
        return f"{namespace}.{snake(words)}"
    if style == "dotted_camel":
        return f"{namespace}.{camel(words)}"
    raise ValueError(f"unknown naming style {style!r}; expected one of {STYLES}")


def parameter_name(words: list[str], style: str) -> str:
    """Parameters follow their function: camelCase with camel-ish styles, else snake_case.

    >>> parameter_name(["due", "date"], "pascal"), parameter_name(["due", "date"], "dotted")
    ('dueDate', 'due_date')
    """
    return camel(words) if style in ("camel", "pascal", "dotted_camel") else snake(words)


def words_of(name: str) -> list[str]:
    """Any style back to lower-case words (a namespace before the last dot is dropped).

    >>> words_of("apiary.getHoneyHarvest"), words_of("Get_UV-Index"), words_of("calcBMI")
    (['get', 'honey', 'harvest'], ['get', 'uv', 'index'], ['calc', 'bmi'])
    """
    last = name.rsplit(".", 1)[-1]
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", last)
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", spaced)
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def name_key(name: str) -> str:
    """The style-free form two names are compared by.

    >>> name_key("apiary.getHive") == name_key("get_hive") == name_key("GetHive")
    True
    """
    return " ".join(words_of(name))
