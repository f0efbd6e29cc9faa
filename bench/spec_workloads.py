"""Workloads of the speculative-decoding benchmark.

* :func:`extraction_cases` -- JSON extraction: a paragraph of text plus a schema whose values all
  appear in the text (seeded, deterministic; several document kinds so keys, value types, nesting
  and arrays vary).
* :func:`generation_cases` -- schema-instance generation: "Produce an example JSON instance for
  this schema: ..." over MaskBench schemas.
"""

from __future__ import annotations

import glob
import json
import os
import random

FIRST = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Gustavo", "Hana", "Ivan", "Julia", "Kenji",
         "Leila", "Mateo", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samir", "Tomoko"]
LAST = ["Anderson", "Bianchi", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen",
        "Kowalski", "Lopez", "Moreau", "Nakamura", "Okafor", "Petrov", "Quinn", "Rossi", "Schmidt", "Tanaka"]
CITIES = ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Montevideo", "Adelaide", "Hamburg", "Chennai",
          "Seville", "Bergen", "Quito"]
COMPANIES = ["Acme Robotics", "Bluefin Analytics", "Cobalt Foods", "Driftwood Media", "Evergreen Energy",
             "Fathom Labs", "Granite Logistics", "Helix Pharma"]
PRODUCTS = ["wireless keyboard", "standing desk", "espresso grinder", "noise-cancelling headphones",
            "hiking backpack", "4K monitor", "ergonomic chair", "portable projector"]
ROLES = ["data engineer", "product designer", "site reliability engineer", "marketing lead",
         "research scientist", "backend developer"]
AIRLINES = ["Azul Air", "Northwind Airways", "Pacific Crest", "Lumen Air"]

PROMPT = ("Extract the information from the text below as JSON matching this schema.\n"
          "Schema: {schema}\n\nText: {text}")


def _date(rng: random.Random) -> str:
    return f"20{rng.randint(19, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _person(rng):
    first, last, city = rng.choice(FIRST), rng.choice(LAST), rng.choice(CITIES)
    age, company, role = rng.randint(21, 68), rng.choice(COMPANIES), rng.choice(ROLES)
    email = f"{first.lower()}.{last.lower()}@example.com"
    text = (f"{first} {last} is a {age}-year-old {role} who lives in {city}. {first} joined {company} "
            f"after several years abroad and can be reached at {email} for questions about the team.")
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"},
        "occupation": {"type": "string"}, "employer": {"type": "string"}, "email": {"type": "string"}},
        "required": ["name", "age", "city", "occupation", "employer", "email"], "additionalProperties": False}
    return text, schema


def _invoice(rng):
    number = f"INV-{rng.randint(2019, 2026)}-{rng.randint(1, 9999):04d}"
    vendor, customer = rng.choice(COMPANIES), f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    items = rng.sample(PRODUCTS, rng.randint(2, 3))
    lines = [(p, rng.randint(1, 9), round(rng.uniform(5, 900), 2)) for p in items]
    desc = "; ".join(f"{q} x {p} at {price} each" for p, q, price in lines)
    text = (f"Invoice {number} was issued by {vendor} to {customer} on {_date(rng)}. It lists: {desc}. "
            f"Payment is due within 30 days.")
    schema = {"type": "object", "properties": {
        "invoice_number": {"type": "string"}, "vendor": {"type": "string"}, "customer": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "product": {"type": "string"}, "quantity": {"type": "integer"}, "unit_price": {"type": "number"}},
            "required": ["product", "quantity", "unit_price"], "additionalProperties": False}}},
        "required": ["invoice_number", "vendor", "customer", "items"], "additionalProperties": False}
    return text, schema


def _meeting(rng):
    people = [f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(rng.randint(2, 4))]
    date, city = _date(rng), rng.choice(CITIES)
    hour = rng.randint(8, 17)
    topic = rng.choice(["the quarterly budget", "the data migration", "hiring plans", "the product launch"])
    text = (f"A meeting about {topic} is scheduled for {date} at {hour}:00 in the {city} office. "
            f"Attendees: {', '.join(people)}. Please bring your notes.")
    schema = {"type": "object", "properties": {
        "topic": {"type": "string"}, "date": {"type": "string"}, "hour": {"type": "integer"},
        "location": {"type": "string"}, "attendees": {"type": "array", "items": {"type": "string"}}},
        "required": ["topic", "date", "hour", "location", "attendees"], "additionalProperties": False}
    return text, schema


def _flight(rng):
    a, b = rng.sample(CITIES, 2)
    airline, code = rng.choice(AIRLINES), f"{rng.choice('ABCDEFGH')}{rng.choice('KLMNPQRS')}{rng.randint(100, 999)}"
    passenger, seat = f"{rng.choice(FIRST)} {rng.choice(LAST)}", f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}"
    text = (f"Booking confirmed: {passenger} flies with {airline} on flight {code} from {a} to {b} "
            f"on {_date(rng)}, seat {seat}. Checked bags: {rng.randint(0, 2)}.")
    schema = {"type": "object", "properties": {
        "passenger": {"type": "string"}, "airline": {"type": "string"}, "flight_number": {"type": "string"},
        "origin": {"type": "string"}, "destination": {"type": "string"}, "date": {"type": "string"},
        "seat": {"type": "string"}, "checked_bags": {"type": "integer"}},
        "required": ["passenger", "airline", "flight_number", "origin", "destination", "date", "seat",
                     "checked_bags"], "additionalProperties": False}
    return text, schema


def _job(rng):
    company, role, city = rng.choice(COMPANIES), rng.choice(ROLES), rng.choice(CITIES)
    low = rng.randint(40, 120) * 1000
    skills = rng.sample(["Python", "SQL", "Kubernetes", "Figma", "Rust", "statistics", "Spark", "TypeScript"], 3)
    remote = rng.choice([True, False])
    text = (f"{company} is hiring a {role} in {city}. The salary range is {low} to {low + 20000} USD. "
            f"Required skills: {', '.join(skills)}. The position is {'remote-friendly' if remote else 'on-site'}.")
    schema = {"type": "object", "properties": {
        "company": {"type": "string"}, "title": {"type": "string"}, "city": {"type": "string"},
        "salary_min": {"type": "integer"}, "salary_max": {"type": "integer"},
        "skills": {"type": "array", "items": {"type": "string"}}, "remote": {"type": "boolean"}},
        "required": ["company", "title", "city", "salary_min", "salary_max", "skills", "remote"],
        "additionalProperties": False}
    return text, schema


def _product(rng):
    product, company = rng.choice(PRODUCTS), rng.choice(COMPANIES)
    price, rating = round(rng.uniform(20, 600), 2), round(rng.uniform(2.5, 5.0), 1)
    sku = f"SKU-{rng.randint(10000, 99999)}"
    text = (f"The {product} from {company} (item {sku}) costs {price} USD and has an average rating of "
            f"{rating} from {rng.randint(12, 4000)} reviews. It ships from {rng.choice(CITIES)}.")
    schema = {"type": "object", "properties": {
        "product": {"type": "string"}, "brand": {"type": "string"}, "sku": {"type": "string"},
        "price": {"type": "number"}, "rating": {"type": "number"}, "reviews": {"type": "integer"},
        "ships_from": {"type": "string"}},
        "required": ["product", "brand", "sku", "price", "rating", "reviews", "ships_from"],
        "additionalProperties": False}
    return text, schema


KINDS = [_person, _invoice, _meeting, _flight, _job, _product]


def extraction_cases(n: int = 36, seed: int = 0) -> list[dict]:
    """``n`` extraction cases ``{"name", "prompt", "schema", "text"}``, cycling through the kinds."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        text, schema = kind(rng)
        out.append({"name": f"{kind.__name__.strip('_')}-{i}", "text": text, "schema": schema,
                    "prompt": PROMPT.format(schema=json.dumps(schema), text=text)})
    return out


def generation_cases(data_dir: str, n: int = 12, families=("Glaive", "Github_easy")) -> list[dict]:
    """``n`` schema-instance generation cases from MaskBench (first files of each family, sorted)."""
    files = []
    per = max(1, n // len(families))
    for fam in families:
        files += sorted(glob.glob(os.path.join(data_dir, fam + "*.json")))[:per]
    out = []
    for path in files[:n]:
        with open(path) as f:
            schema = json.load(f)["schema"]
        out.append({"name": os.path.basename(path), "schema": schema,
                    "prompt": "Produce an example JSON instance for this schema: " + json.dumps(schema)})
    return out
