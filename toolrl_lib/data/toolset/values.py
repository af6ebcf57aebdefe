"""Values as people write them, and the canonical value the ground truth holds.

A ``ValueKind`` samples a canonical value (what a correct call must pass) and writes it the
way a user might ("twelve", "March 5th, 2026", "3:30 pm", "48.86°N 2.35°E"). ``render``
returns the text and the accepted values: every canonical spelling a call may use
(``"15:30"`` and ``"15:30:00"`` for a time), the style of ``rewards/matching.py``.
The ``parse_*`` functions read a phrasing back; the tests use them to show that every
phrasing carries exactly the canonical value.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen")
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


def number_words(n: int) -> str:
    """English words for 0 <= n < 10000.

    >>> number_words(45), number_words(1200), number_words(307)
    ('forty-five', 'one thousand two hundred', 'three hundred seven')
    """
    if not 0 <= n < 10000:
        raise ValueError(f"number_words needs 0 <= n < 10000, got {n}")
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    if n < 1000:
        head = ONES[n // 100] + " hundred"
        return head if n % 100 == 0 else f"{head} {number_words(n % 100)}"
    head = number_words(n // 1000) + " thousand"
    return head if n % 1000 == 0 else f"{head} {number_words(n % 1000)}"


def parse_number_words(text: str) -> int:
    """The inverse of ``number_words``.

    >>> parse_number_words("one thousand two hundred"), parse_number_words("forty-five")
    (1200, 45)
    """
    total = current = 0
    for word in text.replace("-", " ").split():
        if word in ONES:
            current += ONES.index(word)
        elif word in TENS:
            current += 10 * TENS.index(word)
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        else:
            raise ValueError(f"not a number word: {word!r} in {text!r}")
    return total + current


def ordinal(day: int) -> str:
    """A day of the month as people write it.

    >>> [ordinal(d) for d in (1, 2, 3, 11, 22)]
    ['1st', '2nd', '3rd', '11th', '22nd']
    """
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def date_phrasings(iso: str) -> list[str]:
    """Ways to write an ISO date.

    >>> date_phrasings("2026-03-05")[1:3]
    ['March 5, 2026', '5 March 2026']
    """
    year, month, day = (int(part) for part in iso.split("-"))
    name = MONTHS[month - 1]
    return [iso, f"{name} {day}, {year}", f"{day} {name} {year}", f"{name[:3]} {ordinal(day)} {year}",
            f"the {ordinal(day)} of {name} {year}"]


_DATE_PATTERNS = (
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})$"), ("y", "m", "d")),
    (re.compile(r"([A-Z][a-z]+) (\d{1,2}), (\d{4})$"), ("M", "d", "y")),
    (re.compile(r"(\d{1,2}) ([A-Z][a-z]+) (\d{4})$"), ("d", "M", "y")),
    (re.compile(r"([A-Z][a-z]{2}) (\d{1,2})(?:st|nd|rd|th) (\d{4})$"), ("M", "d", "y")),
    (re.compile(r"the (\d{1,2})(?:st|nd|rd|th) of ([A-Z][a-z]+) (\d{4})$"), ("d", "M", "y")),
)


def parse_date(text: str) -> str:
    """Any ``date_phrasings`` form back to ISO.

    >>> parse_date("the 5th of March 2026"), parse_date("Mar 5th 2026")
    ('2026-03-05', '2026-03-05')
    """
    for pattern, order in _DATE_PATTERNS:
        match = pattern.match(text)
        if match:
            parts = dict(zip(order, match.groups(), strict=True))
            month = next(i for i, m in enumerate(MONTHS, 1) if m.startswith(parts["M"])) if "M" in parts else int(parts["m"])
            return f"{int(parts['y']):04d}-{month:02d}-{int(parts['d']):02d}"
    raise ValueError(f"not a date this generator writes: {text!r}")


def time_phrasings(hhmm: str) -> list[str]:
    """Ways to write a 24-hour ``HH:MM`` time.

    >>> time_phrasings("15:30")
    ['15:30', '3:30 pm', '3:30 PM', '3:30 in the afternoon']
    """
    hour, minute = (int(part) for part in hhmm.split(":"))
    twelve = hour % 12 or 12
    half = "am" if hour < 12 else "pm"
    part = "in the morning" if hour < 12 else "in the afternoon" if hour < 18 else "in the evening"
    return [hhmm, f"{twelve}:{minute:02d} {half}", f"{twelve}:{minute:02d} {half.upper()}",
            f"{twelve}:{minute:02d} {part}"]


def parse_time(text: str) -> str:
    """A ``time_phrasings`` form back to 24-hour HH:MM.

    >>> parse_time("3:30 in the afternoon"), parse_time("12:15 am")
    ('15:30', '00:15')
    """
    match = re.match(r"(\d{1,2}):(\d{2})(?: (am|pm|AM|PM|in the morning|in the afternoon|in the evening))?$", text)
    if not match:
        raise ValueError(f"not a time this generator writes: {text!r}")
    hour, minute, tail = int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()
    if tail in ("am", "in the morning"):
        hour %= 12
    elif tail:
        hour = hour % 12 + 12
    return f"{hour:02d}:{minute:02d}"


def coordinate_phrasings(lat: float, lon: float) -> list[str]:
    """Ways to write a latitude/longitude pair.

    >>> coordinate_phrasings(-33.87, 151.21)[1]
    '33.87°S 151.21°E'
    """
    ns, ew = ("N" if lat >= 0 else "S"), ("E" if lon >= 0 else "W")
    return [f"{lat}, {lon}", f"{abs(lat)}°{ns} {abs(lon)}°{ew}", f"latitude {lat} and longitude {lon}"]


def parse_coordinates(text: str) -> tuple[float, float]:
    """Any ``coordinate_phrasings`` form back to (latitude, longitude).

    >>> parse_coordinates("33.87°S 151.21°E")
    (-33.87, 151.21)
    """
    hemis = re.fullmatch(r"([\d.]+)°([NS]) ([\d.]+)°([EW])", text)
    if hemis:
        lat, ns, lon, ew = hemis.groups()
        return (float(lat) * (-1 if ns == "S" else 1), float(lon) * (-1 if ew == "W" else 1))
    numbers = re.findall(r"-?\d+(?:\.\d+)?", text)
    if len(numbers) != 2:
        raise ValueError(f"not coordinates this generator writes: {text!r}")
    return float(numbers[0]), float(numbers[1])


def amount_phrasings(amount: float) -> list[str]:
    """Money amounts with thousands separators, plain, or in words when whole and small.

    >>> amount_phrasings(1250.5)
    ['1,250.50', '1250.5']
    >>> amount_phrasings(300.0)[2]
    'three hundred'
    """
    out = [f"{amount:,.2f}", f"{amount:g}" if amount < 1e6 else f"{amount:.2f}"]
    if amount == int(amount) and amount < 10000:
        out.append(number_words(int(amount)))
    return out


def parse_amount(text: str) -> float:
    """An ``amount_phrasings`` form back to the number.

    >>> parse_amount("1,250.50"), parse_amount("three hundred")
    (1250.5, 300.0)
    """
    if re.fullmatch(r"[\d,]+(?:\.\d+)?", text):
        return float(text.replace(",", ""))
    return float(parse_number_words(text))


def integer_phrasings(n: int) -> list[str]:
    """Digits, or words for small numbers.

    >>> integer_phrasings(12)
    ['12', 'twelve']
    """
    return [str(n), number_words(n)] if 0 <= n < 10000 else [str(n)]


def parse_integer(text: str) -> int:
    """Digits or number words back to the integer.

    >>> parse_integer("twelve"), parse_integer("40")
    (12, 40)
    """
    return int(text) if text.lstrip("-").isdigit() else parse_number_words(text)


@dataclass(frozen=True)
class ValueKind:
    """One kind of value: its JSON Schema, a sampler, and its phrasings.

    ``phrasings(value)`` lists ways to write ``value``; ``accepted(value)`` every canonical
    spelling a call may hold (first = the one the ground truth uses); ``parse`` reads any
    phrasing back to the canonical value (tests only)."""

    name: str
    schema: dict[str, Any]
    sample: Callable[[random.Random], Any]
    phrasings: Callable[[Any], list[str]]
    parse: Callable[[str], Any]
    accepted: Callable[[Any], list[Any]] = lambda value: [value]
    unit: str = ""  # the unit a number is in (said in the parameter's description)

    def render(self, value: Any, rng: random.Random) -> str:
        """One phrasing of ``value``, drawn with ``rng``."""
        return rng.choice(self.phrasings(value))


def _quoted(value: str) -> list[str]:
    return [value, f'"{value}"']


def _unquote(text: str) -> str:
    return text.strip('"')


def _choice_kind(name: str, pool: tuple[str, ...], schema_extra: dict[str, Any] | None = None,
                 quote: bool = False) -> ValueKind:
    return ValueKind(name, {"type": "string", **(schema_extra or {})}, lambda rng: rng.choice(pool),
                     _quoted if quote else (lambda v: [v]), _unquote)


def _date(rng: random.Random) -> str:
    return f"{rng.randint(2025, 2027)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(6, 22):02d}:{rng.choice((0, 15, 30, 45)):02d}"


def _coordinates(rng: random.Random) -> dict[str, float]:
    return {"latitude": round(rng.uniform(-60, 70), 2), "longitude": round(rng.uniform(-170, 170), 2)}


def _amount(rng: random.Random) -> float:
    return float(rng.choice((rng.randint(1, 90) * 10, round(rng.uniform(1, 5000), 2))))


FIRST = ("Ana", "Bram", "Chiara", "Dmitri", "Esi", "Farah", "Goran", "Hana", "Ivo", "Jun",
         "Kalani", "Leila", "Mateo", "Nia", "Oskar", "Pilar", "Quinn", "Rosa", "Sione", "Tove")
LAST = ("Ruiz", "Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Novak", "Silva", "Kowalski",
        "Mensah", "Andersen", "Ibarra", "Kimura", "Petrov", "Osei")
PLACES = ("Porto", "Tallinn", "Kyoto", "Accra", "Valparaíso", "Ljubljana", "Hobart", "Tromsø",
          "Cusco", "Da Nang", "Zanzibar", "Graz", "Antigua", "Bergen", "Medellín", "Cork")
COUNTRY_CODES = {"Portugal": "PT", "Estonia": "EE", "Japan": "JP", "Ghana": "GH", "Chile": "CL",
                 "Slovenia": "SI", "Australia": "AU", "Norway": "NO", "Peru": "PE", "Vietnam": "VN",
                 "Tanzania": "TZ", "Austria": "AT", "Colombia": "CO", "Ireland": "IE"}
CURRENCY_NAMES = {"EUR": ("euros", "€"), "USD": ("US dollars", "$"), "JPY": ("yen", "¥"),
                  "GBP": ("pounds sterling", "£"), "CHF": ("Swiss francs", "CHF"),
                  "NOK": ("Norwegian kroner", "NOK"), "GHS": ("Ghanaian cedis", "GHS")}
WORDS = ("Harbor", "Quarterly", "Lantern", "Meadow", "Orbit", "Cedar", "Summit", "Velvet",
         "Tidal", "Copper", "Juniper", "Maple", "Nimbus", "Prairie", "Quartz", "Saffron")
NOUNS = ("plan", "review", "notes", "draft", "report", "brief", "list", "digest", "log", "memo")
TAGS = ("urgent", "family", "work", "travel", "finance", "health", "archive", "q3", "draft", "shared")


def _person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _title(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)} {rng.choice(NOUNS)}"


def _email(rng: random.Random) -> str:
    return f"{rng.choice(FIRST).lower()}.{rng.choice(LAST).lower()}@example.org"


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice('ABCDEFGHJKLMNPRSTUVWXZ')}{rng.choice('ABCDEFGHJKLMNPRSTUVWXZ')}-{rng.randint(1000, 99999)}"


def _country_phrasings(code: str) -> list[str]:
    name = next(n for n, c in COUNTRY_CODES.items() if c == code)
    return [name, code]


def _parse_country(text: str) -> str:
    return COUNTRY_CODES.get(text, text)


def _currency_phrasings(code: str) -> list[str]:
    return [code, *CURRENCY_NAMES[code]]


def _parse_currency(text: str) -> str:
    return next((code for code, names in CURRENCY_NAMES.items() if text == code or text in names), text)


def _measure_kind(name: str, unit: str, spellings: tuple[str, ...], low: float, high: float) -> ValueKind:
    """A number in a fixed unit (the unit is in the parameter description; users spell it)."""
    def sample(rng: random.Random) -> float:
        return round(rng.uniform(low, high), 1)

    def phrasings(value: float) -> list[str]:
        return [f"{value:g} {s}" for s in spellings] + [f"{value:g}{spellings[0]}"]

    def parse(text: str) -> float:
        return float(re.match(r"-?[\d.]+", text).group(0))  # type: ignore[union-attr]

    return ValueKind(name, {"type": "number"}, sample, phrasings, parse, unit=unit)


KINDS: dict[str, ValueKind] = {kind.name: kind for kind in (
    ValueKind("count", {"type": "integer"}, lambda rng: rng.randint(2, 60), integer_phrasings, parse_integer),
    ValueKind("year", {"type": "integer"}, lambda rng: rng.randint(2018, 2030), lambda v: [str(v)], int),
    ValueKind("amount", {"type": "number"}, _amount, amount_phrasings, parse_amount),
    ValueKind("percent", {"type": "number"}, lambda rng: rng.choice((2.5, 5.0, 7.5, 12.0, 15.0, 20.0, 33.0)),
              lambda v: [f"{v:g}%", f"{v:g} percent"], lambda t: float(t.split("%")[0].split()[0])),
    ValueKind("date", {"type": "string", "format": "date"}, _date, date_phrasings, parse_date),
    ValueKind("time", {"type": "string", "format": "time"}, _time, time_phrasings, parse_time,
              accepted=lambda v: [v, v + ":00"]),
    ValueKind("person", {"type": "string"}, _person, _quoted, _unquote),
    ValueKind("title", {"type": "string"}, _title, _quoted, _unquote),
    ValueKind("email", {"type": "string", "format": "email"}, _email, lambda v: [v], str),
    ValueKind("identifier", {"type": "string"}, _identifier, lambda v: [v, f"#{v}"], lambda t: t.lstrip("#")),
    ValueKind("place", {"type": "string"}, lambda rng: rng.choice(PLACES), lambda v: [v], str),
    ValueKind("country", {"type": "string", "pattern": "^[A-Z]{2}$"},
              lambda rng: rng.choice(tuple(COUNTRY_CODES.values())), _country_phrasings, _parse_country),
    ValueKind("currency", {"type": "string", "pattern": "^[A-Z]{3}$"},
              lambda rng: rng.choice(tuple(CURRENCY_NAMES)), _currency_phrasings, _parse_currency),
    _choice_kind("tag", TAGS),
    _measure_kind("weight", "kilograms", ("kg", "kilograms", "kilos"), 0.2, 80),
    _measure_kind("distance", "kilometres", ("km", "kilometres", "kilometers"), 0.5, 400),
    _measure_kind("temperature", "degrees Celsius", ("°C", "degrees Celsius", "degrees C"), -10, 40),
    _measure_kind("duration", "hours", ("h", "hours", "hrs"), 0.5, 12),
    _measure_kind("volume", "litres", ("L", "litres", "liters"), 0.2, 50),
)}


def coordinates_kind() -> ValueKind:
    """A nested object ``{latitude, longitude}`` written as people write coordinates."""
    def phrasings(value: dict[str, float]) -> list[str]:
        return coordinate_phrasings(value["latitude"], value["longitude"])

    def parse(text: str) -> dict[str, float]:
        lat, lon = parse_coordinates(text)
        return {"latitude": lat, "longitude": lon}

    schema = {"type": "object", "properties": {
        "latitude": {"type": "number", "description": "Degrees north (negative: south)"},
        "longitude": {"type": "number", "description": "Degrees east (negative: west)"}},
        "required": ["latitude", "longitude"]}
    return ValueKind("coordinates", schema, _coordinates, phrasings, parse)


def money_kind() -> ValueKind:
    """A nested object ``{amount, currency}``: "1,250.50 euros", "¥300"."""
    def sample(rng: random.Random) -> dict[str, Any]:
        return {"amount": _amount(rng), "currency": rng.choice(tuple(CURRENCY_NAMES))}

    def phrasings(value: dict[str, Any]) -> list[str]:
        amount, code = value["amount"], value["currency"]
        name, symbol = CURRENCY_NAMES[code]
        plain = amount_phrasings(amount)[:2]
        return [f"{plain[0]} {code}", f"{plain[1]} {name}", f"{symbol}{plain[0]}" if len(symbol) == 1 else f"{symbol} {plain[0]}"]

    def parse(text: str) -> dict[str, Any]:
        for code, (name, symbol) in CURRENCY_NAMES.items():
            for mark in (code, name, symbol):
                if text.endswith(" " + mark) or text.startswith(mark):
                    number = text.removesuffix(" " + mark).removeprefix(mark).strip()
                    if re.fullmatch(r"[\d,]+(?:\.\d+)?", number):
                        return {"amount": parse_amount(number), "currency": code}
        raise ValueError(f"not money this generator writes: {text!r}")

    schema = {"type": "object", "properties": {
        "amount": {"type": "number", "description": "Amount in the currency's main unit"},
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"}},
        "required": ["amount", "currency"]}
    return ValueKind("money", schema, sample, phrasings, parse)


def address_kind() -> ValueKind:
    """A nested object ``{street, city, postal_code}`` (``country`` optional)."""
    streets = ("Rua das Flores", "Lai 14", "Sanjo-dori", "Oxford Street", "Avenida Brasil",
               "Trubarjeva", "Sandy Bay Road", "Storgata")

    def sample(rng: random.Random) -> dict[str, str]:
        return {"street": f"{rng.randint(1, 240)} {rng.choice(streets)}", "city": rng.choice(PLACES),
                "postal_code": f"{rng.randint(1000, 99999)}"}

    def phrasings(value: dict[str, str]) -> list[str]:
        return [f"{value['street']}, {value['postal_code']} {value['city']}",
                f"{value['street']}, {value['city']} {value['postal_code']}"]

    def parse(text: str) -> dict[str, str]:
        street, rest = text.split(", ", 1)
        first, second = rest.split(" ", 1)
        code, city = (first, second) if first.isdigit() else (rest.rsplit(" ", 1)[1], rest.rsplit(" ", 1)[0])
        return {"street": street, "city": city, "postal_code": code}

    schema = {"type": "object", "properties": {
        "street": {"type": "string", "description": "Street and house number"},
        "city": {"type": "string", "description": "City"},
        "postal_code": {"type": "string", "description": "Postal code"}},
        "required": ["street", "city", "postal_code"]}
    return ValueKind("address", schema, sample, phrasings, parse)


for _kind in (coordinates_kind(), money_kind(), address_kind()):
    KINDS[_kind.name] = _kind
