"""Ground truths with several accepted values per argument (BFCL's possible answers).

Training data carries one answer per argument; BFCL's entries carry a list of accepted
values per argument, where ``""`` means "may be omitted". A gold call may hold that list
under ``ACCEPTED`` (``{"name", "arguments", "accepted": {arg: [values]}}``); the reward then
scores the call the way BFCL's AST checker does:

* every argument of the prediction must be a key of ``accepted`` (no extra keys);
* a key the prediction omits is fine only when ``""`` is among its accepted values (no
  schema defaults are filled in: BFCL lists an omissible argument with ``""``);
* a value matches when it matches *any* accepted value (``values_match`` rules); inside an
  accepted value, a dict maps each key to its own accepted list, also in a list of dicts.

``credit = matched keys / |union of keys|``, with omitted-and-omissible keys left out of the
union, so credit is 1 exactly when BFCL's rules (under our value matching) accept the call.
"""

from __future__ import annotations

from typing import Any

from toolrl_lib.rewards.matching import MAX_DEPTH, values_match

ACCEPTED = "accepted"


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
