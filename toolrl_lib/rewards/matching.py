"""Type-aware value matching and the call assignment shared by every reward scheme.

Value rules (``values_match(pred, gold, schema)``), driven by the parameter's JSON Schema:

* ``integer``: a JSON integer (``5``; BFCL's rule: ``5.0`` is a float and does not match
  ``5`` unless the gold value is itself a float); a string ``"5"`` does not (the model
  must emit the right JSON type); booleans never count as numbers.
* ``number``: ints and floats, equal within relative 1e-6 (absolute 1e-9); non-finite never.
* ``boolean``: JSON ``true``/``false`` only (not ``"true"``, not ``1``).
* ``string``: compared after trimming and collapsing inner whitespace; case is ignored for
  free-text strings, and respected where the schema constrains the value (``enum``,
  ``const``, ``pattern``, ``format``) or there is no schema at all.
* ``array``: same length, element by element with ``items``; ``object``: same keys, values
  by ``properties``; ``null``: both null. A list of types (``["string", "null"]``) matches
  when any of them does.
* No schema: the gold value's own JSON type decides, by the same rules (case-sensitive).
  Nesting deeper than ``MAX_DEPTH`` never matches.

Arguments (``fill_defaults``): a parameter present on one side only counts as present on
the other with the schema's ``default`` (omitting an optional argument whose default is
the right value is correct; spelling the default out is correct too).

Accepted values (``accepted_credit``): training data carries one answer per argument;
BFCL's entries carry a list of accepted values per argument, where ``""`` means "may be
omitted". A gold call may hold those lists under ``ACCEPTED`` (``{"name", "arguments",
"accepted": {arg: [values]}}``, attached by ``with_accepted``); it is then scored the way
BFCL's AST checker does, instead of by its ``arguments``:

* every argument of the prediction must be a key of ``accepted`` (no extra keys);
* a key the prediction omits is fine only when ``""`` is among its accepted values (no
  schema defaults are filled in: BFCL lists an omissible argument with ``""``);
* a value matches when it matches *any* accepted value (``values_match`` rules); inside an
  accepted value, a dict maps each key to its own accepted list, also in a list of dicts.

``credit = matched keys / |union of keys|``, with omitted-and-omissible keys left out of the
union, so credit is 1 exactly when BFCL's rules (under our value matching) accept the call.

Calls (``assign``): predicted and gold calls are paired one-to-one only when their names
are equal, choosing the pairing that maximises the summed argument credit (Hungarian
algorithm within each name, so order never matters). Unpaired calls are extra or missing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

MAX_DEPTH = 32
ACCEPTED = "accepted"  # the gold-call key of BFCL's accepted-value lists
_CONSTRAINED = ("enum", "const", "pattern", "format")
# Python-style type names that some sources (BFCL, xLAM) use instead of JSON Schema's.
_ALIASES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
            "dict": "object", "list": "array", "tuple": "array", "NoneType": "null"}


def _norm(text: str, fold: bool) -> str:
    text = " ".join(text.split())
    return text.casefold() if fold else text


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numbers_match(pred: Any, gold: Any, integral: bool) -> bool:
    if not (_is_number(pred) and _is_number(gold)):
        return False
    if not (math.isfinite(pred) and math.isfinite(gold)):
        return False
    if integral and isinstance(pred, float) and not isinstance(gold, float):
        return False  # BFCL's type check: an integer parameter wants an int
    if isinstance(pred, int) and isinstance(gold, int):
        return pred == gold
    return math.isclose(pred, gold, rel_tol=1e-6, abs_tol=1e-9)


def _schema_type(schema: dict[str, Any] | None, gold: Any) -> list[str]:
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        declared = [declared]
    if isinstance(declared, list):
        kinds = [_ALIASES.get(t, t) for t in declared if isinstance(t, str) and t not in ("any", "")]
        if kinds:
            return kinds
    if gold is None:
        return ["null"]
    if isinstance(gold, bool):
        return ["boolean"]
    if isinstance(gold, int):
        return ["integer"]
    if isinstance(gold, float):
        return ["number"]
    if isinstance(gold, str):
        return ["string"]
    if isinstance(gold, list):
        return ["array"]
    if isinstance(gold, dict):
        return ["object"]
    return ["unknown"]


def values_match(pred: Any, gold: Any, schema: dict[str, Any] | None = None, depth: int = 0) -> bool:
    """Does ``pred`` equal ``gold`` under the parameter ``schema``? Never raises."""
    if depth > MAX_DEPTH:
        return False
    kind = type(gold)
    if type(pred) is kind and (kind is str or kind is int or kind is bool) and pred == gold:
        return True  # identical scalars match under every rule below
    schema = schema if isinstance(schema, dict) else None
    kinds = _schema_type(schema, gold)
    for kind in kinds:
        if _match_as(kind, pred, gold, schema, depth):
            return True
    if schema is not None and not any(_conforms(gold, kind) for kind in kinds):
        # The gold value itself breaks the schema (a data quirk): trust the gold's own type.
        return values_match(pred, gold, None, depth)
    return False


_CONFORMS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": _is_number,
    "float": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _conforms(value: Any, kind: str) -> bool:
    check = _CONFORMS.get(kind)
    return check is None or check(value)


def _match_as(kind: str, pred: Any, gold: Any, schema: dict | None, depth: int) -> bool:
    if kind == "string":
        if not (isinstance(pred, str) and isinstance(gold, str)):
            return False
        fold = schema is not None and not any(key in schema for key in _CONSTRAINED)
        return _norm(pred, fold) == _norm(gold, fold)
    if kind == "integer":
        return _numbers_match(pred, gold, integral=True)
    if kind in ("number", "float"):
        return _numbers_match(pred, gold, integral=False)
    if kind == "boolean":
        return isinstance(pred, bool) and isinstance(gold, bool) and pred == gold
    if kind == "null":
        return pred is None and gold is None
    if kind == "array":
        if not (isinstance(pred, list) and isinstance(gold, list)) or len(pred) != len(gold):
            return False
        items = schema.get("items") if schema else None
        return all(values_match(p, g, items, depth + 1) for p, g in zip(pred, gold, strict=True))
    if kind == "object":
        if not (isinstance(pred, dict) and isinstance(gold, dict)) or pred.keys() != gold.keys():
            return False
        props = schema.get("properties") if schema else None
        props = props if isinstance(props, dict) else {}
        return all(values_match(pred[k], gold[k], props.get(k), depth + 1) for k in gold)
    return type(pred) is type(gold) and pred == gold


def tool_properties(tools: Any) -> dict[str, dict[str, Any]]:
    """``{tool name: {param: schema}}`` from a tool list, skipping malformed entries."""
    table: dict[str, dict[str, Any]] = {}
    if not isinstance(tools, list):
        return table
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if "function" in tool and isinstance(tool["function"], dict):
            tool = tool["function"]
        name = tool.get("name")
        params = tool.get("parameters")
        props = params.get("properties") if isinstance(params, dict) else None
        if isinstance(name, str):
            table[name] = props if isinstance(props, dict) else {}
    return table


def fill_defaults(pred: dict, gold: dict, props: dict[str, Any]) -> tuple[dict, dict]:
    """Copies of both argument dicts where a key on one side only takes its schema default."""
    if pred.keys() == gold.keys() or not props:
        return pred, gold
    filled_pred, filled_gold = pred, gold
    for key, spec in props.items():  # bounded by the schema, not by what the model wrote
        if isinstance(spec, dict) and "default" in spec and (key in pred) != (key in gold):
            if key in gold:
                filled_pred = filled_pred if filled_pred is not pred else dict(pred)
                filled_pred[key] = spec["default"]
            else:
                filled_gold = filled_gold if filled_gold is not gold else dict(gold)
                filled_gold[key] = spec["default"]
    return filled_pred, filled_gold


def argument_stats(pred: dict, gold: dict, props: dict[str, Any]) -> tuple[int, int, int, int]:
    """``(values matched, |union of keys|, |shared keys|, |gold keys|)`` after defaults.

    A value counts as matched only for keys on both sides whose values match.
    """
    pred, gold = fill_defaults(pred, gold, props)
    matched = shared = 0
    for key, gold_value in gold.items():
        if key in pred:
            shared += 1
            if values_match(pred[key], gold_value, props.get(key)):
                matched += 1
    union = len(gold) + len(pred) - shared
    return matched, union, shared, len(gold)


def argument_credit(pred: dict, gold: dict, props: dict[str, Any]) -> float:
    """Partial credit in [0, 1]: matched values / |union of keys| (1 when both are empty)."""
    matched, union, _, _ = argument_stats(pred, gold, props)
    return matched / union if union else 1.0


def with_accepted(calls: list[dict[str, Any]], possible_answer: Any) -> list[dict[str, Any]]:
    """``calls`` (one choice per argument, in answer order) with BFCL's accepted lists
    attached; a call whose name does not line up with the answer is returned unchanged."""
    answers = [(name, args) for item in possible_answer or [] if isinstance(item, dict)
               for name, args in item.items()]
    out = []
    for i, call in enumerate(calls):
        call = dict(call)
        if i < len(answers) and answers[i][0] == call.get("name") and isinstance(answers[i][1], dict | None):
            call[ACCEPTED] = {k: v if isinstance(v, list) else [v] for k, v in (answers[i][1] or {}).items()}
        out.append(call)
    return out


def _alternative_matches(pred: Any, alt: Any, schema: dict[str, Any] | None, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(alt, dict):
        if not isinstance(pred, dict):
            return False
        props = schema.get("properties") if isinstance(schema, dict) else None
        props = props if isinstance(props, dict) else {}
        return _keys_match(pred, {k: v if isinstance(v, list) else [v] for k, v in alt.items()}, props, depth + 1)
    if isinstance(alt, list) and any(isinstance(v, dict) for v in alt):
        if not isinstance(pred, list) or len(pred) != len(alt):
            return False
        items = schema.get("items") if isinstance(schema, dict) else None
        return all(_alternative_matches(p, a, items, depth + 1) for p, a in zip(pred, alt, strict=True))
    return values_match(pred, alt, schema, depth)


def _value_ok(pred: Any, values: list[Any], schema: Any, depth: int) -> bool:
    return any(v != "" and _alternative_matches(pred, v, schema, depth) for v in values)


def _keys_match(pred: dict, accepted: dict[str, list[Any]], props: dict[str, Any], depth: int) -> bool:
    if set(pred) - set(accepted):
        return False
    return all(("" in values) if key not in pred else _value_ok(pred[key], values, props.get(key), depth)
               for key, values in accepted.items())


def accepted_credit(pred: dict[str, Any], accepted: dict[str, list[Any]], props: dict[str, Any]) -> float:
    """Partial credit in [0, 1] of predicted arguments against accepted lists (1 = accepted)."""
    matched = union = 0
    for key, values in accepted.items():
        if key not in pred:
            union += 0 if "" in values else 1
            continue
        union += 1
        matched += _value_ok(pred[key], values, props.get(key), 0)
    union += len(set(pred) - set(accepted))
    return matched / union if union else 1.0


def _hungarian_max(weights: list[list[float]]) -> list[tuple[int, int]]:
    """Max-weight assignment for an n×m matrix with n ≤ m (O(n²m), no recursion)."""
    n, m = len(weights), len(weights[0])
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner, way = [0] * (m + 1), [0] * (m + 1)
    for i in range(1, n + 1):
        owner[0] = i
        j0 = 0
        min_to = [inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = owner[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -weights[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < min_to[j]:
                        min_to[j], way[j] = cur, j0
                    if min_to[j] < delta:
                        delta, j1 = min_to[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    min_to[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    return [(owner[j] - 1, j - 1) for j in range(1, m + 1) if owner[j]]


def assign(pred_calls: list[dict], gold_calls: list[dict], tools_props: dict[str, dict]) -> list[tuple[int, int, float]]:
    """Pair predicted with gold calls of the same name maximising argument credit.

    Returns ``(pred index, gold index, credit)`` for each pair.
    """
    if len(pred_calls) == 1 and len(gold_calls) == 1:  # the common case
        pred, gold = pred_calls[0], gold_calls[0]
        if pred["name"] != gold.get("name"):
            return []
        props = tools_props.get(pred["name"], {})
        return [(0, 0, _credit(pred["arguments"], gold, props))]
    by_name: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for i, call in enumerate(pred_calls):
        by_name[call["name"]][0].append(i)
    for j, call in enumerate(gold_calls):
        if call.get("name") in by_name:
            by_name[call["name"]][1].append(j)
    pairs: list[tuple[int, int, float]] = []
    for name, (preds, golds) in by_name.items():
        if not golds:
            continue
        props = tools_props.get(name, {})
        credit = [
            [_credit(pred_calls[i]["arguments"], gold_calls[j], props) for j in golds]
            for i in preds
        ]
        if len(preds) == 1 and len(golds) == 1:
            pairs.append((preds[0], golds[0], credit[0][0]))
            continue
        if len(preds) <= len(golds):
            chosen = _hungarian_max(credit)
            pairs.extend((preds[a], golds[b], credit[a][b]) for a, b in chosen)
        else:
            transposed = [list(column) for column in zip(*credit, strict=True)]
            chosen = _hungarian_max(transposed)
            pairs.extend((preds[b], golds[a], credit[b][a]) for a, b in chosen)
    return pairs


def _gold_args(call: dict) -> dict:
    arguments = call.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def _credit(pred_args: dict, gold: dict, props: dict[str, Any]) -> float:
    """Argument credit against a gold call: its accepted lists when it has them, else its arguments."""
    accepted = gold.get(ACCEPTED)
    if isinstance(accepted, dict):
        return accepted_credit(pred_args, accepted, props)
    return argument_credit(pred_args, _gold_args(gold), props)
