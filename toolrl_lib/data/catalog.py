"""The synthetic generator's function catalogue: 66 functions over 13 domains.

Each function has a JSON Schema (built from compact ``Param`` specs), pools of plausible
argument values, and query templates that mention every required argument as ``{name}``.
Optional parameters carry a ``phrase`` (``"in {}"``) that is appended when the generator
decides to set them, so the query always states exactly the arguments of the ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Param:
    """One parameter: its schema and how values are sampled and phrased."""

    name: str
    type: str  # JSON Schema type
    description: str
    pool: tuple = ()  # values to sample (lists for arrays, dicts for objects)
    enum: tuple = ()
    items: str = ""  # item type of arrays
    properties: tuple = ()  # (name, type, description) of object fields
    required: bool = True
    default: Any = None
    phrase: str = ""  # how an optional value is mentioned: "in {}"
    render: str = ""  # how an object value is written in the query: "{street}, {city}"

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.enum:
            out["enum"] = list(self.enum)
        if self.items:
            out["items"] = {"type": self.items}
        if self.properties:
            out["properties"] = {n: {"type": t, "description": d} for n, t, d in self.properties}
            out["required"] = [n for n, _, _ in self.properties]
        if not self.required and self.default is not None:
            out["default"] = self.default
        return out


@dataclass(frozen=True)
class Function:
    domain: str
    name: str
    description: str
    params: tuple[Param, ...]
    templates: tuple[str, ...]
    tags: tuple[str, ...] = field(default=())

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": {"type": "object",
                               "properties": {p.name: p.schema() for p in self.params},
                               "required": [p.name for p in self.params if p.required]}}


def S(name, desc, pool, **kw) -> Param:  # noqa: N802 - short spec constructors
    return Param(name, "string", desc, tuple(pool), **_opt(kw))


def I(name, desc, pool, **kw) -> Param:  # noqa: N802, E743
    return Param(name, "integer", desc, tuple(pool), **_opt(kw))


def N(name, desc, pool, **kw) -> Param:  # noqa: N802
    return Param(name, "number", desc, tuple(pool), **_opt(kw))


def E(name, desc, values, **kw) -> Param:  # noqa: N802
    return Param(name, "string", desc, tuple(values), enum=tuple(values), **_opt(kw))


def B(name, desc, phrase) -> Param:  # noqa: N802
    """Booleans are optional, default false, and set (to true) only when phrased."""
    return Param(name, "boolean", desc, (True,), required=False, default=False, phrase=phrase)


def A(name, desc, item_type, pool, **kw) -> Param:  # noqa: N802
    return Param(name, "array", desc, tuple(pool), items=item_type, **_opt(kw))


def Obj(name, desc, properties, pool, render, **kw) -> Param:  # noqa: N802
    return Param(name, "object", desc, tuple(pool), properties=tuple(properties),
                 render=render, **_opt(kw))


def _opt(kw: dict[str, Any]) -> dict[str, Any]:
    if "phrase" in kw:
        kw.setdefault("required", False)
    return kw


CITIES = ("Paris", "Berlin", "Tokyo", "Nairobi", "Lima", "Toronto", "Sydney", "Madrid",
          "Seoul", "Cairo", "Oslo", "Chicago", "Mumbai", "Lisbon", "Denver", "Hanoi")
COUNTRIES = ("France", "Japan", "Kenya", "Peru", "Canada", "Brazil", "India", "Norway",
             "Mexico", "Egypt", "Italy", "Vietnam")
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "CHF", "CAD", "AUD", "INR", "BRL")
TICKERS = ("AAPL", "MSFT", "NVDA", "TSLA", "AMZN", "GOOGL", "IBM", "SAP", "ORCL")
PEOPLE = ("Alice", "Bob", "Priya", "Chen", "Fatima", "Lukas", "Maria", "Omar", "Yuki")
EMAILS = ("alice@example.com", "bob.smith@example.org", "priya@corp.example",
          "chen.li@example.net", "team@startup.example")
DATES = ("2025-03-14", "2025-07-01", "2025-11-20", "2026-01-05", "2026-02-28", "2025-09-09")
TIMES = ("09:00", "10:30", "13:15", "15:45", "18:00")
LANGS = ("French", "German", "Spanish", "Japanese", "Swahili", "Portuguese")
SONGS = ("Bohemian Rhapsody", "Clair de Lune", "Take Five", "Hotel California", "Dancing Queen")
ARTISTS = ("Miles Davis", "Adele", "Queen", "Radiohead", "Fela Kuti", "Ryuichi Sakamoto")
TEAMS = ("Arsenal", "Lakers", "Yankees", "Real Madrid", "Warriors", "Celtics", "Juventus")
DISHES = ("lasagna", "pad thai", "shakshuka", "ramen", "paella", "falafel", "pancakes")
INGREDIENTS = (["eggs", "spinach"], ["rice", "chicken", "ginger"], ["tomatoes", "basil"],
               ["tofu", "broccoli", "garlic"], ["lentils", "carrots"])
PRODUCTS = ("wireless headphones", "running shoes", "a standing desk", "a coffee grinder",
            "a yoga mat", "a mechanical keyboard")
ROOMS = ("living room", "kitchen", "bedroom", "office", "garage")
FILES = ("report.pdf", "notes/todo.txt", "data/sales_2024.csv", "img/logo.png", "main.py")
ADDRESSES = ({"street": "12 Rue Cler", "city": "Paris", "zip": "75007"},
             {"street": "221B Baker Street", "city": "London", "zip": "NW1 6XE"},
             {"street": "1600 Amphitheatre Pkwy", "city": "Mountain View", "zip": "94043"},
             {"street": "5 Kärntner Ring", "city": "Vienna", "zip": "1010"})
ADDRESS_FIELDS = (("street", "string", "Street and number"), ("city", "string", "City"),
                  ("zip", "string", "Postal code"))

FUNCTIONS: tuple[Function, ...] = (
    # weather
    Function("weather", "get_current_weather", "Get the current weather conditions for a city.",
             (S("city", "Name of the city", CITIES),
              E("unit", "Temperature unit", ("celsius", "fahrenheit"), default="celsius",
                phrase="in {}")),
             ("What's the weather like in {city} right now?", "Tell me the current weather in {city}.",
              "How is the weather in {city} at the moment?")),
    Function("weather", "get_weather_forecast", "Get a daily weather forecast for a city.",
             (S("city", "Name of the city", CITIES), I("days", "Number of days to forecast (1-14)", (3, 5, 7, 10)),
              B("include_hourly", "Also return hourly detail", "with hourly detail")),
             ("Give me the {days}-day forecast for {city}.", "What will the weather be in {city} over the next {days} days?")),
    Function("weather", "get_air_quality", "Get the air quality index for a city.",
             (S("city", "Name of the city", CITIES),
              E("pollutant", "Pollutant to report", ("pm25", "pm10", "ozone", "no2"), default="pm25",
                phrase="for {}")),
             ("How clean is the air in {city} today?", "Check the air quality index in {city}.")),
    Function("weather", "get_uv_index", "Get the UV index for a location and date.",
             (S("city", "Name of the city", CITIES), S("date", "Date (YYYY-MM-DD)", DATES)),
             ("What is the UV index in {city} on {date}?", "Check UV levels for {city} on {date}.")),
    Function("weather", "get_sunrise_sunset", "Get sunrise and sunset times for a city on a date.",
             (S("city", "Name of the city", CITIES), S("date", "Date (YYYY-MM-DD)", DATES)),
             ("When does the sun rise and set in {city} on {date}?", "Sunrise and sunset times for {city} on {date}, please.")),
    # finance
    Function("finance", "get_stock_price", "Get the latest trading price of a stock.",
             (S("ticker", "Stock ticker symbol", TICKERS),
              E("exchange", "Stock exchange", ("NASDAQ", "NYSE", "XETRA"), phrase="on the {}")),
             ("What's {ticker} trading at?", "Get me the latest stock price of {ticker}.",
              "How much is one share of {ticker} right now?")),
    Function("finance", "convert_currency", "Convert an amount from one currency to another.",
             (N("amount", "Amount to convert", (100, 250.5, 1000, 42, 75.25)),
              S("from_currency", "ISO code of the source currency", CURRENCIES),
              S("to_currency", "ISO code of the target currency", CURRENCIES)),
             ("Convert {amount} {from_currency} to {to_currency}.", "How much is {amount} {from_currency} in {to_currency}?")),
    Function("finance", "calculate_loan_payment", "Compute the monthly payment of an amortised loan.",
             (N("principal", "Loan amount", (150000, 20000, 350000, 8500)),
              N("annual_rate", "Annual interest rate in percent", (3.5, 4.2, 6.0, 7.25)),
              I("years", "Loan term in years", (5, 15, 20, 30))),
             ("What would my monthly payment be on a {principal} loan at {annual_rate}% over {years} years?",
              "Calculate the monthly installment for borrowing {principal} at {annual_rate} percent for {years} years.")),
    Function("finance", "get_exchange_rate_history", "Get historical exchange rates between two currencies.",
             (S("base", "ISO code of the base currency", CURRENCIES), S("quote", "ISO code of the quote currency", CURRENCIES),
              S("start_date", "First date (YYYY-MM-DD)", DATES), I("limit", "Maximum number of points", (10, 30, 90), default=30, phrase="with at most {} data points")),
             ("Show the {base}/{quote} exchange rate history since {start_date}.",
              "How has {base} moved against {quote} since {start_date}?")),
    Function("finance", "compute_compound_interest", "Compute the future value of an investment with compound interest.",
             (N("principal", "Initial investment", (1000, 5000, 12000)), N("rate", "Annual rate as a decimal", (0.03, 0.05, 0.07)),
              I("years", "Number of years", (3, 10, 25)),
              I("compounds_per_year", "Compounding periods per year", (1, 4, 12), default=1, phrase="compounded {} times a year")),
             ("If I invest {principal} at a rate of {rate} for {years} years, what will it be worth?",
              "Compute compound interest on {principal} at {rate} over {years} years.")),
    Function("finance", "get_company_financials", "Get key financial statements for a listed company.",
             (S("ticker", "Stock ticker symbol", TICKERS), E("statement", "Which statement", ("income", "balance", "cashflow")),
              I("year", "Fiscal year", (2022, 2023, 2024), phrase="for fiscal year {}")),
             ("Pull the {statement} statement for {ticker}.", "I need {ticker}'s {statement} statement.")),
    # travel
    Function("travel", "search_flights", "Search flights between two cities on a date.",
             (S("origin", "Departure city", CITIES), S("destination", "Arrival city", CITIES),
              S("date", "Departure date (YYYY-MM-DD)", DATES),
              E("cabin", "Cabin class", ("economy", "premium", "business"), default="economy", phrase="in {} class"),
              I("passengers", "Number of passengers", (2, 3, 4), default=1, phrase="for {} passengers")),
             ("Find flights from {origin} to {destination} on {date}.", "Are there any flights from {origin} to {destination} on {date}?")),
    Function("travel", "book_hotel", "Book a hotel room in a city.",
             (S("city", "City", CITIES), S("check_in", "Check-in date (YYYY-MM-DD)", DATES),
              I("nights", "Number of nights", (1, 2, 3, 5, 7)),
              I("guests", "Number of guests", (2, 3), default=1, phrase="for {} guests")),
             ("Book me a hotel in {city} from {check_in} for {nights} nights.", "I need a room in {city} checking in {check_in}, staying {nights} nights.")),
    Function("travel", "get_visa_requirements", "Look up visa requirements for a trip.",
             (S("citizenship", "Traveller's country of citizenship", COUNTRIES), S("destination", "Destination country", COUNTRIES)),
             ("Do citizens of {citizenship} need a visa to visit {destination}?", "What are the visa rules for a {citizenship} passport holder travelling to {destination}?")),
    Function("travel", "rent_car", "Reserve a rental car.",
             (S("city", "Pick-up city", CITIES), S("pickup_date", "Pick-up date (YYYY-MM-DD)", DATES), I("days", "Rental length in days", (2, 4, 7)),
              E("car_type", "Vehicle class", ("compact", "suv", "van", "electric"), phrase="and I'd like a {}")),
             ("Rent me a car in {city} on {pickup_date} for {days} days.", "I need a rental car in {city} starting {pickup_date} for {days} days.")),
    Function("travel", "get_local_time", "Get the current local time in a city.",
             (S("city", "City", CITIES),),
             ("What time is it in {city}?", "Tell me the local time in {city}.")),
    # math
    Function("math", "solve_quadratic", "Solve a*x^2 + b*x + c = 0.",
             (N("a", "Coefficient of x^2", (1, 2, 3, -1)), N("b", "Coefficient of x", (-3, 4, 0, 5)), N("c", "Constant term", (2, -8, 1, 6))),
             ("Solve the quadratic equation with a={a}, b={b} and c={c}.", "Find the roots of {a}x^2 + {b}x + {c}.")),
    Function("math", "calculate_statistics", "Compute summary statistics of a list of numbers.",
             (A("numbers", "The data", "number", ([3, 7, 7, 19], [1.5, 2.5, 10], [4, 8, 15, 16, 23, 42])),
              A("measures", "Which statistics to compute", "string", (["mean", "median"], ["std", "max"]), phrase="reporting {}")),
             ("Give me statistics for the numbers {numbers}.", "Compute summary stats of {numbers}.")),
    Function("math", "convert_units", "Convert a quantity between units.",
             (N("value", "Quantity", (5, 12.5, 100, 3.2)), E("from_unit", "Source unit", ("km", "mile", "kg", "pound", "liter", "gallon")),
              E("to_unit", "Target unit", ("km", "mile", "kg", "pound", "liter", "gallon"))),
             ("Convert {value} {from_unit} to {to_unit}.", "How many {to_unit} is {value} {from_unit}?")),
    Function("math", "gcd", "Greatest common divisor of two integers.",
             (I("a", "First integer", (12, 84, 270, 1071)), I("b", "Second integer", (18, 36, 192, 462))),
             ("What's the greatest common divisor of {a} and {b}?", "Compute gcd({a}, {b}).")),
    Function("math", "binomial_probability", "Probability of k successes in n Bernoulli trials.",
             (I("n", "Number of trials", (10, 20, 30)), I("k", "Number of successes", (2, 5, 7)), N("p", "Success probability", (0.1, 0.25, 0.5))),
             ("What's the probability of exactly {k} successes in {n} trials with p={p}?", "Compute the binomial probability for n={n}, k={k}, p={p}.")),
    Function("math", "matrix_determinant", "Determinant of a square matrix.",
             (A("matrix", "Rows of the matrix", "array", ([[1, 2], [3, 4]], [[2, 0, 1], [1, 3, 2], [1, 1, 1]])),),
             ("What's the determinant of {matrix}?", "Compute det of the matrix {matrix}.")),
    # calendar
    Function("calendar", "create_event", "Create a calendar event.",
             (S("title", "Event title", ("Team sync", "Dentist", "Project kickoff", "Lunch with Sam", "Budget review")),
              S("date", "Date (YYYY-MM-DD)", DATES), S("time", "Start time (HH:MM)", TIMES),
              I("duration_minutes", "Length in minutes", (30, 45, 90), default=60, phrase="lasting {} minutes"),
              A("attendees", "Emails of the invitees", "string", (["alice@example.com"], ["bob.smith@example.org", "priya@corp.example"]), phrase="and invite {}")),
             ("Schedule '{title}' on {date} at {time}.", "Put {title} in my calendar for {date} at {time}.")),
    Function("calendar", "list_events", "List calendar events in a date range.",
             (S("start_date", "First day (YYYY-MM-DD)", DATES), S("end_date", "Last day (YYYY-MM-DD)", DATES)),
             ("What's on my calendar between {start_date} and {end_date}?", "List my events from {start_date} to {end_date}.")),
    Function("calendar", "find_free_slot", "Find a free meeting slot shared by several people.",
             (A("participants", "People who must attend", "string", (["Alice", "Bob"], ["Priya", "Chen", "Omar"])),
              I("duration_minutes", "Meeting length in minutes", (30, 60)), S("date", "Day to search (YYYY-MM-DD)", DATES)),
             ("Find a {duration_minutes}-minute slot on {date} when {participants} are all free.", "When can {participants} meet for {duration_minutes} minutes on {date}?")),
    Function("calendar", "set_reminder", "Set a reminder.",
             (S("message", "What to remind about", ("call mom", "take medicine", "submit the report", "water the plants")),
              S("time", "Time (HH:MM)", TIMES), E("repeat", "Repetition", ("none", "daily", "weekly"), default="none", phrase="repeating {}")),
             ("Remind me to {message} at {time}.", "Set a reminder at {time} to {message}.")),
    Function("calendar", "cancel_event", "Cancel a calendar event by its id.",
             (S("event_id", "Identifier of the event", ("evt_1042", "evt_2231", "evt_0007", "evt_9310")),
              B("notify_attendees", "Email the attendees about the cancellation", "and let the attendees know")),
             ("Cancel event {event_id}.", "Please delete the calendar event {event_id}.")),
    # communication
    Function("communication", "send_email", "Send an email.",
             (S("to", "Recipient address", EMAILS), S("subject", "Subject line", ("Quarterly numbers", "Lunch tomorrow?", "Invoice 3312", "Welcome aboard")),
              S("body", "Message text", ("See the attached figures.", "Are you free at noon?", "Please find the invoice attached.", "Glad to have you on the team!")),
              A("cc", "Addresses to copy", "string", (["team@startup.example"], ["bob.smith@example.org"]), phrase="with {} in copy")),
             ("Email {to} with the subject '{subject}' saying: {body}", "Send an email to {to}, subject '{subject}', body '{body}'.")),
    Function("communication", "send_sms", "Send a text message to a phone number.",
             (S("phone_number", "Number in international format", ("+14155550123", "+447700900123", "+81312345678")),
              S("message", "Text", ("Running 10 minutes late", "Your code is 4417", "Happy birthday!"))),
             ("Text {phone_number}: '{message}'.", "Send an SMS saying '{message}' to {phone_number}.")),
    Function("communication", "post_to_channel", "Post a message to a team chat channel.",
             (S("channel", "Channel name", ("#general", "#deploys", "#random", "#support")), S("text", "Message", ("Release 2.3 is out", "Standup moved to 10", "Coffee in the kitchen"))),
             ("Post '{text}' in {channel}.", "Tell {channel} that {text}.")),
    Function("communication", "translate_text", "Translate text into another language.",
             (S("text", "Text to translate", ("Where is the train station?", "Thank you very much", "The meeting is postponed")),
              S("target_language", "Language to translate into", LANGS),
              S("source_language", "Language of the text", ("English",), phrase="from {}")),
             ("Translate '{text}' into {target_language}.", "How do you say '{text}' in {target_language}?")),
    Function("communication", "schedule_call", "Schedule a video call with a contact.",
             (S("contact", "Contact name", PEOPLE), S("date", "Date (YYYY-MM-DD)", DATES), S("time", "Time (HH:MM)", TIMES)),
             ("Set up a video call with {contact} on {date} at {time}.", "Schedule a call with {contact} for {date} {time}.")),
    # shopping
    Function("shopping", "search_products", "Search the product catalogue.",
             (S("query", "Search terms", PRODUCTS), N("max_price", "Maximum price", (50, 120, 300), phrase="under {} dollars"),
              E("sort_by", "Sort order", ("relevance", "price", "rating"), default="relevance", phrase="sorted by {}")),
             ("Search for {query}.", "Find me {query} in the store.", "I'm looking for {query}.")),
    Function("shopping", "add_to_cart", "Add a product to the shopping cart.",
             (S("product_id", "Product identifier", ("SKU-1001", "SKU-2093", "SKU-7781", "SKU-0420")), I("quantity", "How many", (1, 2, 3, 5))),
             ("Add {quantity} of {product_id} to my cart.", "Put {quantity} units of product {product_id} in the basket.")),
    Function("shopping", "track_order", "Track the delivery status of an order.",
             (S("order_id", "Order number", ("ORD-88123", "ORD-10002", "ORD-55510")),),
             ("Where is my order {order_id}?", "Track order {order_id} for me.")),
    Function("shopping", "apply_coupon", "Apply a discount code to the cart.",
             (S("code", "Coupon code", ("SPRING10", "WELCOME5", "FREESHIP")),),
             ("Apply the coupon {code}.", "Use discount code {code} on my cart.")),
    Function("shopping", "update_shipping_address", "Change the delivery address of an order.",
             (S("order_id", "Order number", ("ORD-88123", "ORD-10002", "ORD-55510")),
              Obj("address", "New address", ADDRESS_FIELDS, ADDRESSES, "{street}, {city} {zip}")),
             ("Ship order {order_id} to {address} instead.", "Change the delivery address of {order_id} to {address}.")),
    # music
    Function("music", "play_song", "Play a song on the speaker.",
             (S("title", "Song title", SONGS), S("artist", "Artist", ARTISTS, phrase="by {}"),
              B("shuffle", "Shuffle after this song", "and shuffle afterwards")),
             ("Play {title}.", "Put on {title}, please.")),
    Function("music", "create_playlist", "Create a playlist from songs.",
             (S("name", "Playlist name", ("Road trip", "Focus", "Sunday morning", "Workout")),
              A("songs", "Song titles", "string", (["Take Five", "Clair de Lune"], ["Dancing Queen", "Hotel California", "Bohemian Rhapsody"])),
              B("public", "Make the playlist public", "and make it public")),
             ("Make a playlist called {name} with {songs}.", "Create the playlist '{name}' containing {songs}.")),
    Function("music", "get_artist_info", "Get a short biography and top tracks of an artist.",
             (S("artist", "Artist name", ARTISTS),),
             ("Tell me about {artist}.", "Who is {artist}? Give me their bio and top tracks.")),
    Function("music", "set_volume", "Set the speaker volume.",
             (I("level", "Volume from 0 to 100", (10, 25, 40, 60, 80)), S("room", "Speaker room", ROOMS, phrase="in the {}")),
             ("Set the volume to {level}.", "Turn the volume to {level} percent.")),
    Function("music", "get_lyrics", "Fetch the lyrics of a song.",
             (S("title", "Song title", SONGS), S("artist", "Artist", ARTISTS)),
             ("Show me the lyrics of {title} by {artist}.", "What are the words to {artist}'s {title}?")),
    # sports
    Function("sports", "get_match_score", "Get the score of a team's latest or given match.",
             (S("team", "Team name", TEAMS), S("date", "Match date (YYYY-MM-DD)", DATES, phrase="on {}")),
             ("What was the score of the {team} game?", "How did {team} do in their last match?")),
    Function("sports", "get_league_standings", "Get the current standings of a league.",
             (E("league", "League", ("Premier League", "NBA", "MLB", "La Liga", "Serie A")), I("season", "Season start year", (2023, 2024, 2025), phrase="for the {} season")),
             ("Show me the {league} table.", "What are the current {league} standings?")),
    Function("sports", "get_player_stats", "Get a player's season statistics.",
             (S("player", "Player name", ("LeBron James", "Bukayo Saka", "Shohei Ohtani", "Aitana Bonmatí")), I("season", "Season start year", (2023, 2024))),
             ("Give me {player}'s stats for the {season} season.", "How did {player} perform in {season}?")),
    Function("sports", "book_court", "Book a sports court.",
             (E("sport", "Sport", ("tennis", "squash", "badminton", "padel")), S("date", "Date (YYYY-MM-DD)", DATES), S("time", "Start time (HH:MM)", TIMES),
              I("hours", "Booking length in hours", (2, 3), default=1, phrase="for {} hours")),
             ("Book a {sport} court on {date} at {time}.", "Reserve a {sport} court for {date} at {time}.")),
    Function("sports", "get_fixtures", "List a team's upcoming matches.",
             (S("team", "Team name", TEAMS), I("count", "How many matches", (3, 5), default=5, phrase="showing the next {}")),
             ("When does {team} play next?", "List the upcoming fixtures of {team}.")),
    # health
    Function("health", "calculate_bmi", "Body mass index from weight and height.",
             (N("weight_kg", "Weight in kilograms", (55, 68.5, 82, 95)), N("height_m", "Height in metres", (1.62, 1.75, 1.8, 1.91))),
             ("What's my BMI if I weigh {weight_kg} kg and I'm {height_m} m tall?", "Calculate BMI for {weight_kg} kg and {height_m} m.")),
    Function("health", "log_workout", "Log a workout session.",
             (E("activity", "Type of activity", ("running", "cycling", "swimming", "yoga")), I("minutes", "Duration in minutes", (20, 30, 45, 60)),
              I("calories", "Calories burned", (150, 300, 450), phrase="burning {} calories")),
             ("Log {minutes} minutes of {activity}.", "I did {activity} for {minutes} minutes, record it.")),
    Function("health", "find_doctor", "Find doctors of a specialty near a city.",
             (E("specialty", "Medical specialty", ("dermatology", "cardiology", "pediatrics", "dentistry")), S("city", "City", CITIES),
              B("accepts_new_patients", "Only doctors accepting new patients", "who accept new patients")),
             ("Find a {specialty} doctor in {city}.", "I need a {specialty} specialist in {city}.")),
    Function("health", "get_nutrition_facts", "Nutrition facts of a food item.",
             (S("food", "Food item", ("banana", "oatmeal", "greek yogurt", "almonds", "avocado")), N("grams", "Serving size in grams", (50, 100, 150), default=100, phrase="for a {} gram serving")),
             ("How many calories are in {food}?", "Give me the nutrition facts for {food}.")),
    Function("health", "track_water_intake", "Record how much water was drunk.",
             (I("milliliters", "Amount in millilitres", (250, 500, 750)),),
             ("I just drank {milliliters} ml of water, log it.", "Add {milliliters} millilitres to my water tracker.")),
    # food
    Function("food", "find_recipe", "Find recipes that use given ingredients.",
             (A("ingredients", "Ingredients to use", "string", INGREDIENTS),
              E("diet", "Dietary restriction", ("vegetarian", "vegan", "gluten-free"), phrase="that are {}"),
              I("max_minutes", "Maximum cooking time", (20, 30, 45), phrase="taking at most {} minutes")),
             ("Find me a recipe with {ingredients}.", "What can I cook with {ingredients}?")),
    Function("food", "order_food", "Order a dish for delivery from a restaurant.",
             (S("restaurant", "Restaurant name", ("Luigi's", "Green Bowl", "Sakura House", "El Patio")), S("dish", "Dish", DISHES), I("quantity", "Number of portions", (1, 2, 3))),
             ("Order {quantity} {dish} from {restaurant}.", "Get me {quantity} portions of {dish} from {restaurant}.")),
    Function("food", "find_restaurants", "Search restaurants in a city.",
             (S("city", "City", CITIES), E("cuisine", "Cuisine", ("italian", "thai", "mexican", "japanese", "ethiopian")),
              E("price_range", "Price level", ("$", "$$", "$$$"), phrase="in the {} range")),
             ("Find {cuisine} restaurants in {city}.", "Where can I eat {cuisine} food in {city}?")),
    Function("food", "make_reservation", "Reserve a table at a restaurant.",
             (S("restaurant", "Restaurant name", ("Luigi's", "Green Bowl", "Sakura House", "El Patio")), S("date", "Date (YYYY-MM-DD)", DATES),
              S("time", "Time (HH:MM)", TIMES), I("party_size", "Number of people", (2, 4, 6))),
             ("Reserve a table for {party_size} at {restaurant} on {date} at {time}.", "Book {restaurant} for {party_size} people, {date} at {time}.")),
    Function("food", "scale_recipe", "Scale a recipe's ingredient amounts to a number of servings.",
             (S("dish", "Dish", DISHES), I("servings", "Target servings", (2, 6, 8, 12))),
             ("Scale the {dish} recipe to {servings} servings.", "Adjust my {dish} recipe so it serves {servings}.")),
    # geography
    Function("geography", "get_directions", "Directions between two places.",
             (S("origin", "Start", CITIES), S("destination", "End", CITIES),
              E("mode", "Travel mode", ("driving", "walking", "transit", "cycling"), default="driving", phrase="by {}")),
             ("How do I get from {origin} to {destination}?", "Give me directions from {origin} to {destination}.")),
    Function("geography", "get_country_info", "Facts about a country (capital, population, currency).",
             (S("country", "Country name", COUNTRIES), A("fields", "Which facts", "string", (["capital", "population"], ["currency"]), phrase="only {}")),
             ("Tell me about {country}.", "Give me the key facts on {country}.")),
    Function("geography", "geocode_address", "Latitude and longitude of a postal address.",
             (Obj("address", "The address", ADDRESS_FIELDS, ADDRESSES, "{street}, {city} {zip}"),),
             ("What are the coordinates of {address}?", "Geocode {address}.")),
    Function("geography", "distance_between", "Great-circle distance between two cities.",
             (S("city_a", "First city", CITIES), S("city_b", "Second city", CITIES), E("unit", "Distance unit", ("km", "miles"), default="km", phrase="in {}")),
             ("How far is {city_a} from {city_b}?", "What's the distance between {city_a} and {city_b}?")),
    Function("geography", "find_nearby", "Find places of a category near a city.",
             (E("category", "Kind of place", ("pharmacy", "museum", "park", "gas station", "library")), S("city", "City", CITIES),
              I("radius_km", "Search radius in km", (1, 5, 10), default=2, phrase="within {} km")),
             ("Is there a {category} near {city}?", "Find a {category} close to {city}.")),
    # smart home
    Function("smart_home", "set_thermostat", "Set the thermostat temperature.",
             (N("temperature", "Target temperature in Celsius", (19, 20.5, 22, 24)), S("room", "Room", ROOMS, phrase="in the {}")),
             ("Set the thermostat to {temperature} degrees.", "Make it {temperature} degrees.")),
    Function("smart_home", "control_lights", "Turn lights on or off, optionally dimmed.",
             (S("room", "Room", ROOMS), E("state", "On or off", ("on", "off")), I("brightness", "Brightness percent", (20, 50, 80), phrase="at {} percent brightness")),
             ("Turn {state} the lights in the {room}.", "Switch the {room} lights {state}.")),
    Function("smart_home", "lock_door", "Lock or unlock a door.",
             (E("door", "Which door", ("front", "back", "garage")), E("action", "Lock or unlock", ("lock", "unlock"))),
             ("Please {action} the {door} door.", "{action} the {door} door now.")),
    Function("smart_home", "start_robot_vacuum", "Start the robot vacuum.",
             (A("rooms", "Rooms to clean", "string", (["kitchen"], ["living room", "bedroom"], ["office", "kitchen", "garage"])),
              E("power", "Suction power", ("quiet", "standard", "max"), default="standard", phrase="on {} power")),
             ("Vacuum the {rooms}.", "Start the robot vacuum in the {rooms}.")),
    Function("smart_home", "get_energy_usage", "Get household energy usage for a period.",
             (E("period", "Period", ("day", "week", "month")), S("device", "Single device to report", ("heat pump", "washing machine", "fridge"), phrase="for the {}")),
             ("How much energy did we use this {period}?", "Show the energy usage for the past {period}.")),
    # files & devops
    Function("files", "read_file", "Read a text file.",
             (S("path", "File path", FILES), I("max_lines", "Maximum number of lines", (10, 50, 100), phrase="up to {} lines")),
             ("Open {path}.", "Show me the contents of {path}.")),
    Function("files", "compress_files", "Create a zip archive from files.",
             (A("paths", "Files to include", "string", (["report.pdf", "main.py"], ["img/logo.png", "notes/todo.txt", "data/sales_2024.csv"])),
              S("archive_name", "Name of the archive", ("backup.zip", "bundle.zip", "export.zip"))),
             ("Zip {paths} into {archive_name}.", "Compress {paths} as {archive_name}.")),
    Function("files", "search_files", "Search files by name pattern.",
             (S("pattern", "Glob pattern", ("*.csv", "*.py", "report*", "*.png")), S("directory", "Folder to search", ("/home/user", "/data", "/srv/app")),
              B("recursive", "Search sub-folders too", "including sub-folders")),
             ("Find files matching {pattern} in {directory}.", "Search {directory} for {pattern}.")),
    Function("files", "deploy_service", "Deploy a service version to an environment.",
             (S("service", "Service name", ("billing-api", "web-frontend", "auth-service")), S("version", "Version tag", ("v1.4.2", "v2.0.0", "v3.1.7")),
              E("environment", "Target environment", ("staging", "production", "dev")), I("replicas", "Number of replicas", (2, 3, 5), default=1, phrase="with {} replicas")),
             ("Deploy {service} {version} to {environment}.", "Roll out version {version} of {service} on {environment}.")),
    Function("files", "get_server_metrics", "CPU and memory metrics of a host.",
             (S("host", "Host name", ("web-01", "db-02", "cache-03")), A("metrics", "Metrics to return", "string", (["cpu", "memory"], ["disk", "network"])),
              I("minutes", "Look-back window in minutes", (15, 60), default=5, phrase="over the last {} minutes")),
             ("Show {metrics} for {host}.", "What are the {metrics} numbers on {host}?")),
)

DOMAINS: tuple[str, ...] = tuple(dict.fromkeys(f.domain for f in FUNCTIONS))
BY_NAME: dict[str, Function] = {f.name: f for f in FUNCTIONS}
