"""``format`` as regexes over the decoded string (anchored; ASCII classes written out).

Formats in :data:`UNENFORCEABLE_FORMATS` are asserted by validators but not regular: strict
mode raises for them. Other formats are annotations in JSON Schema (2019-09 on, and the
validators' default before): they are recorded on the compiled grammar as not enforced.
"""

from __future__ import annotations

_D2 = "[0-9]{2}"
_LEAP = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = ("(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
         "|02-(?:0[1-9]|1[0-9]|2[0-8]))|" + _LEAP + "-02-29)")
_PARTIAL_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?"
_OFFSET = "(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"


def _ipv6() -> str:
    h = _H16
    forms = [
        rf"(?:{h}:){{6}}{_LS32}",
        rf"::(?:{h}:){{5}}{_LS32}",
        rf"(?:{h})?::(?:{h}:){{4}}{_LS32}",
        rf"(?:(?:{h}:){{0,1}}{h})?::(?:{h}:){{3}}{_LS32}",
        rf"(?:(?:{h}:){{0,2}}{h})?::(?:{h}:){{2}}{_LS32}",
        rf"(?:(?:{h}:){{0,3}}{h})?::{h}:{_LS32}",
        rf"(?:(?:{h}:){{0,4}}{h})?::{_LS32}",
        rf"(?:(?:{h}:){{0,5}}{h})?::{h}",
        rf"(?:(?:{h}:){{0,6}}{h})?::",
    ]
    return "|".join(f"(?:{f})" for f in forms)


_DUR_T = "T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_D = "(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_URI_CHARS = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
# a relative reference's first segment has no ":" (RFC 3986 path-noscheme)
_RELATIVE_REF = r"(?:[A-Za-z0-9\-._~\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*(?:[/?#]" + _URI_CHARS + "*)?"
_JSON_POINTER = "(?:/(?:[^~/]|~[01])*)*"

FORMATS: dict[str, str] = {
    "date-time": f"{_DATE}[Tt]{_PARTIAL_TIME}{_OFFSET}",
    "date": _DATE,
    "time": f"{_PARTIAL_TIME}{_OFFSET}",
    "duration": f"P(?:{_DUR_D}(?:{_DUR_T})?|{_DUR_T}|[0-9]+W)",
    "email": rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_LABEL}(?:\.{_LABEL})*",
    "hostname": rf"{_LABEL}(?:\.{_LABEL})*",
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "uri": rf"[A-Za-z][A-Za-z0-9+.\-]*:{_URI_CHARS}*",
    "uri-reference": rf"[A-Za-z][A-Za-z0-9+.\-]*:{_URI_CHARS}*|{_RELATIVE_REF}",
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})",
    "uuid": "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
}


#: formats that validators check but no regular language captures exactly (or only with
#: tables we do not ship): strict mode refuses them rather than accept what they reject
UNENFORCEABLE_FORMATS = frozenset({"regex", "iri", "iri-reference", "uri-template", "idn-email", "idn-hostname"})


def format_regex(name: str) -> str | None:
    """The full-match regex of a known format, or None for an annotation-only format."""
    return FORMATS.get(name)
