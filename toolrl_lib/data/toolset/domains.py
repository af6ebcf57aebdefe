"""The domains of the broad tool set: what each one is about, in a line each.

A domain names its namespace (for dotted function names), six entities its functions act
on, one enumerated field of its own and the shared slots (``SLOTS``) its parameters draw
from. Signatures (``signatures.py``) are built from these lines; nothing here is BFCL's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """A parameter idea: its words, value kind (``values.KINDS`` key, ``flag`` or
    ``array:<kind>``), description, and how a query mentions it (``"on {}"``; a flag's
    ``phrase`` says yes, its ``off_phrase`` no)."""

    words: str
    kind: str
    description: str
    phrase: str
    off_phrase: str = ""


SLOTS: dict[str, Slot] = {
    "person": Slot("contact name", "person", "Full name of the person", "for {}"),
    "assignee": Slot("assignee", "person", "Full name of the person responsible", "assigned to {}"),
    "email": Slot("email", "email", "Email address to use", "using the address {}"),
    "title": Slot("title", "title", "Short human-readable title", "titled {}"),
    "label": Slot("display name", "title", "Name shown to users", "named {}"),
    "date": Slot("date", "date", "Calendar date, ISO 8601 (YYYY-MM-DD)", "on {}"),
    "start_date": Slot("start date", "date", "First day, ISO 8601 (YYYY-MM-DD)", "starting {}"),
    "end_date": Slot("end date", "date", "Last day, ISO 8601 (YYYY-MM-DD)", "ending {}"),
    "due_date": Slot("due date", "date", "Deadline, ISO 8601 (YYYY-MM-DD)", "due by {}"),
    "time": Slot("time", "time", "Time of day, 24-hour HH:MM", "at {}"),
    "start_time": Slot("start time", "time", "Start time, 24-hour HH:MM", "beginning at {}"),
    "quantity": Slot("quantity", "count", "How many units", "with a quantity of {}"),
    "party": Slot("party size", "count", "Number of people", "for a group of {}"),
    "seats": Slot("seat count", "count", "Number of seats", "with {} seats"),
    "amount": Slot("amount", "amount", "Amount in the account's currency", "for an amount of {}"),
    "budget": Slot("budget", "money", "Largest amount to spend, with its currency", "with a budget of {}"),
    "price": Slot("unit price", "money", "Price of one unit, with its currency", "priced at {}"),
    "discount": Slot("discount percent", "percent", "Discount in percent", "with a {} discount"),
    "rate": Slot("rate percent", "percent", "Rate in percent per year", "at a rate of {}"),
    "city": Slot("city", "place", "City name", "in {}"),
    "origin": Slot("origin city", "place", "City it starts from", "from {}"),
    "destination": Slot("destination city", "place", "City it goes to", "to {}"),
    "country": Slot("country code", "country", "ISO 3166-1 alpha-2 country code", "for the country {}"),
    "currency": Slot("currency code", "currency", "ISO 4217 currency code", "with the currency set to {}"),
    "location": Slot("location", "coordinates", "Latitude and longitude in decimal degrees", "at the coordinates {}"),
    "address": Slot("postal address", "address", "Postal address", "at the address {}"),
    "weight": Slot("weight kg", "weight", "Weight in kilograms", "weighing {}"),
    "distance": Slot("distance km", "distance", "Distance in kilometres", "covering {}"),
    "temperature": Slot("target temperature", "temperature", "Temperature in degrees Celsius", "set to {}"),
    "duration": Slot("duration hours", "duration", "Length in hours", "lasting {}"),
    "volume": Slot("volume litres", "volume", "Volume in litres", "holding {}"),
    "year": Slot("year", "year", "Calendar year", "for the year {}"),
    "tags": Slot("tags", "array:tag", "Labels to attach", "tagged {}"),
    "invitees": Slot("invitee emails", "array:email", "Email addresses to invite", "inviting {}"),
    "members": Slot("member names", "array:person", "Full names of the people involved", "with {}"),
    "slots": Slot("slot numbers", "array:count", "Numbered slots to use", "in slots {}"),
    "weights": Slot("item weights", "array:weight", "Weights of the items in kilograms", "with item weights of {}"),
    "dates": Slot("dates", "array:date", "Several dates, each YYYY-MM-DD", "on the dates {}"),
    "notify": Slot("notify", "flag", "Tell the people involved", "and notify everyone involved",
                   "without notifying anyone"),
    "urgent": Slot("urgent", "flag", "Handle before anything else", "and treat it as urgent", "and it is not urgent"),
    "public": Slot("public", "flag", "Visible to everyone", "and make it public", "and keep it private"),
    "dry_run": Slot("dry run", "flag", "Only simulate, change nothing", "as a dry run only", "for real, not as a dry run"),
}


@dataclass(frozen=True)
class Domain:
    """One domain: its name, namespace, entities, own enum and the slots it uses."""

    name: str
    namespace: str
    entities: tuple[str, ...]
    enum: tuple[str, tuple[str, ...]]  # (parameter words, values)
    slots: tuple[str, ...]


def _d(name: str, namespace: str, entities: str, enum_words: str, enum_values: str, slots: str) -> Domain:
    """A domain from one compact line (space-separated lists; ``_`` joins words)."""
    return Domain(name, namespace, tuple(e.replace("_", " ") for e in entities.split()),
                  (enum_words, tuple(v.replace("_", " ") for v in enum_values.split())), tuple(slots.split()))


DOMAINS: tuple[Domain, ...] = (
    _d("beekeeping", "apiary", "hive colony inspection honey_harvest queen swarm_report",
       "hive type", "langstroth top_bar warre", "date location weight notify year tags assignee"),
    _d("library lending", "lending", "loan hold reading_list catalogue_card patron_card overdue_notice",
       "format", "paperback hardcover ebook audiobook", "person due_date title email tags notify dates"),
    _d("cargo shipping", "cargo", "container manifest shipment berth customs_form pallet",
       "service level", "standard express economy", "origin destination weight weights date country urgent"),
    _d("greenhouse", "greenhouse", "bed seedling watering_plan sensor harvest_log climate_zone",
       "crop family", "brassica legume nightshade allium", "temperature volume date time slots duration tags"),
    _d("clinic scheduling", "clinic", "appointment referral exam_room waitlist_entry vaccination_record lab_order",
       "visit type", "in_person video phone", "person date time start_time duration notify urgent"),
    _d("school timetable", "timetable", "lesson classroom substitution exam parent_meeting homework_set",
       "term", "autumn spring summer", "assignee date start_time duration seats title members"),
    _d("bike sharing", "bikeshare", "dock bike_unit ride membership repair_ticket rebalancing_run",
       "bike class", "classic electric cargo", "location distance duration date person amount public"),
    _d("event ticketing", "tickets", "venue seat_block ticket_order show presale_code guest_list",
       "seat zone", "floor balcony box standing", "party date time price invitees email title"),
    _d("wine cellar", "cellar", "bottle rack tasting_note vintage_lot cellar_inventory pairing_card",
       "wine style", "red white rose sparkling", "year price quantity temperature tags title slots"),
    _d("pet care", "petcare", "pet_profile vet_visit feeding_plan grooming_slot kennel_stay medication_dose",
       "species", "dog cat rabbit bird", "person weight date time duration notify dates"),
    _d("solar installation", "solar", "panel_array inverter site_survey yield_report permit_file battery_bank",
       "roof type", "flat pitched ground", "location address distance date year budget dry_run"),
    _d("choir management", "choir", "rehearsal voice_part score_sheet concert attendance_sheet soloist",
       "voice range", "soprano alto tenor bass", "date start_time duration members title city invitees"),
    _d("fleet maintenance", "fleet", "vehicle service_job tyre_set fuel_log inspection_slot driver_roster",
       "fuel type", "diesel petrol electric hybrid", "distance volume date assignee urgent amount tags"),
    _d("recipe planning", "kitchen", "recipe meal_plan pantry_item shopping_run prep_task menu_card",
       "diet", "vegan vegetarian pescatarian omnivore", "party weight volume duration date tags title"),
    _d("coworking spaces", "cowork", "desk_booking meeting_room locker member_pass visitor_badge floor_plan",
       "room size", "small medium large", "date start_time duration seats person invitees notify"),
    _d("museum collections", "collections", "artifact exhibit loan_agreement conservation_task gallery audio_tour",
       "material", "ceramic textile metal wood paper", "title year country weight assignee tags public"),
    _d("freight rail", "railfreight", "wagon consignment timetable_slot yard_move crew_shift loading_order",
       "wagon type", "flatcar hopper tanker boxcar", "origin destination weight date time distance urgent"),
    _d("swimming pool", "pool", "lane_booking swim_lesson water_test lifeguard_shift pool_pass maintenance_window",
       "pool area", "lap_pool learner_pool diving_well", "date start_time duration temperature person party"),
    _d("insurance claims", "claims", "claim policy adjuster_visit damage_photo settlement coverage_check",
       "claim category", "water fire theft collision", "amount date address person currency urgent dates"),
    _d("podcast studio", "studio", "episode recording_slot guest_booking mic_kit edit_pass show_note",
       "audio format", "mp3 wav flac", "title date start_time duration members email public"),
    _d("orchard", "orchard", "tree_row picking_crew fruit_lot spray_plan frost_alert cider_batch",
       "fruit", "apple pear cherry plum", "weight volume date location assignee year slots"),
    _d("hackathon", "hackathon", "team submission judge_panel mentor_hour prize challenge_track",
       "track level", "beginner intermediate advanced", "title members invitees date time tags public"),
    _d("ferry bookings", "ferry", "crossing cabin vehicle_deck passenger_list port_call boarding_pass",
       "deck class", "upper lower outside", "origin destination date time party weight price"),
    _d("lab inventory", "labstock", "reagent freezer_box sample_tube order_request hazard_sheet calibration",
       "storage class", "ambient cold frozen", "volume weight temperature quantity due_date assignee slots"),
    _d("marathon race", "racecourse", "runner_bib aid_station split_time course_segment volunteer_post medal_order",
       "race category", "full half relay", "distance person time start_time location quantity notify"),
    _d("tailoring", "atelier", "garment_order fitting measurement_set fabric_roll alteration pattern_piece",
       "fabric", "wool linen silk cotton", "person date time price due_date title urgent"),
    _d("observatory", "observatory", "observation_run telescope_slot target_list night_log dome_schedule image_stack",
       "filter band", "u g r i z", "location date start_time duration temperature title dry_run"),
    _d("vineyard tours", "winetour", "tour_slot tasting_flight guide_shift shuttle_run group_booking souvenir_order",
       "tour language", "english portuguese japanese german", "party date time price origin invitees email"),
    _d("climbing gym", "boulder", "route_setting day_pass belay_course gear_rental wall_section competition_heat",
       "grade band", "easy moderate hard elite", "person date start_time duration members price tags"),
    _d("fishing permits", "angling", "permit catch_report boat_launch zone_closure tackle_check stock_survey",
       "water type", "river lake coastal", "location weight date person year country dates"),
    _d("home renovation", "renovate", "work_order quote material_list site_visit contractor_bid snag_item",
       "trade", "plumbing electrical carpentry tiling", "address budget date assignee due_date urgent tags"),
    _d("radio station", "broadcast", "playlist ad_spot jingle call_in segment_log transmitter_check",
       "program block", "morning midday evening overnight", "title date start_time duration person public slots"),
    _d("community garden", "allotment", "plot compost_bin tool_loan work_day seed_swap water_rota",
       "plot size", "quarter half full", "person date time members volume tags notify"),
    _d("parking garage", "parking", "parking_space permit_card entry_log ev_charger fine_notice monthly_pass",
       "vehicle size", "compact standard oversize", "date start_time duration amount currency location country"),
    _d("translation agency", "translate", "translation_job glossary proofread_task translator_pool word_quote style_guide",
       "register", "formal neutral casual", "country due_date amount currency assignee title urgent"),
    _d("ski resort", "skiresort", "lift_pass lesson_block snow_report equipment_hire slope_closure chalet_stay",
       "skill level", "novice intermediate expert", "party date duration temperature price person location"),
    _d("print shop", "printshop", "print_job proof_sheet paper_stock binding_order poster_run delivery_slip",
       "paper finish", "matte gloss satin", "quantity price due_date address title weight urgent"),
    _d("water utility", "waterworks", "meter_reading leak_report service_line pressure_test outage_notice bill_adjustment",
       "meter type", "analog smart", "address volume date amount location notify dates"),
    _d("theatre production", "stagecraft", "cast_list prop_item cue_sheet costume_fitting run_through house_seat",
       "stage area", "upstage downstage wings pit", "title date start_time members assignee slots public"),
    _d("aquarium", "aquarium", "tank feeding_round water_sample animal_record diver_shift tank_tour",
       "water kind", "fresh salt brackish", "volume temperature weight date time assignee tags"),
    _d("bakery orders", "bakehouse", "cake_order bread_batch oven_slot pastry_box allergen_card delivery_round",
       "dough", "sourdough brioche rye spelt", "quantity weight date time price address title"),
    _d("drone surveying", "aerial", "flight_plan survey_area image_batch no_fly_check battery_cycle pilot_log",
       "sensor", "rgb thermal lidar multispectral", "location distance duration date assignee dry_run dates"),
    _d("charity fundraising", "fundraise", "donation campaign pledge volunteer_shift gift_receipt matching_fund",
       "cause area", "education health environment housing", "amount currency person email date year public"),
    _d("sailing club", "sailclub", "boat_charter mooring regatta crew_list sail_repair safety_briefing",
       "boat class", "dinghy keelboat catamaran", "date start_time duration members location party weight"),
    _d("dental practice", "dental", "checkup x_ray_order treatment_plan hygienist_slot recall_card lab_crown",
       "treatment", "cleaning filling crown extraction", "person date time duration amount notify urgent"),
    _d("laundry service", "laundry", "wash_order pickup_slot garment_tag stain_ticket folding_batch route_stop",
       "wash program", "delicate normal heavy", "weight address date time quantity price tags"),
    _d("archery range", "archery", "lane_slot bow_rental scorecard tournament_round coaching_block target_face",
       "bow type", "recurve compound longbow", "distance person date start_time slots members price"),
    _d("energy co-op", "cooperative", "share_certificate member_vote turbine_report payout metering_point grid_offer",
       "energy source", "wind solar hydro biomass", "amount currency year person location distance public"),
)
