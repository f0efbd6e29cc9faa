"""guidewire: structured and code-generation decoding, right by construction."""

__version__ = "0.1.0"

