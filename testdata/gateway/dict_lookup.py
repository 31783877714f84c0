#!/usr/bin/env python3
"""Look Pix keys up at the DICT through balde's DICT gateway.

A DICT client that is not balde's: the Python standard library only, the
DICT API as published (GET /api/v2/entries/{key} with PI-RequestingParticipant,
PI-PayerId and PI-EndToEndId). The gateway's URL replaces the DICT's; nothing
else changes. A 429 is the DICT's problem XML either way; the gateway's own
carries "Balde-Refused: local".

    dict_lookup.py --url http://127.0.0.1:8081 --participant 12345678 \
        --payer 11144477735 --e2e-prefix E1234567820250101120 KEY...

Prints one JSON line per key: {"key", "status", "local", "retry_after",
"problem_type"}. Exit status 0 when every key got an answer.
"""

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

PROBLEM_NS = "{urn:ietf:rfc:7807}"


def lookup(url, participant, payer, e2e, key, timeout):
    req = urllib.request.Request(
        url.rstrip("/") + "/api/v2/entries/" + urllib.parse.quote(key, safe="@+"),
        headers={
            "PI-RequestingParticipant": participant,
            "PI-PayerId": payer,
            "PI-EndToEndId": e2e,
            "Accept": "application/xml",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def problem_type(body):
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return ""
    typ = root.find(PROBLEM_NS + "type")
    return "" if typ is None else typ.text.rsplit("/", 1)[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--participant", required=True)
    ap.add_argument("--payer", required=True)
    ap.add_argument("--e2e-prefix", required=True, help="21 characters: E + ISPB + yyyyMMddHHmm")
    ap.add_argument("--start", type=int, default=0, help="first EndToEndId sequence number")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("keys", nargs="+")
    args = ap.parse_args()
    for i, key in enumerate(args.keys):
        e2e = "%s%011d" % (args.e2e_prefix, args.start + i)
        status, headers, body = lookup(args.url, args.participant, args.payer, e2e, key, args.timeout)
        print(json.dumps({
            "key": key,
            "status": status,
            "local": headers.get("Balde-Refused") == "local",
            "retry_after": headers.get("Retry-After") or "",
            "problem_type": problem_type(body) if status >= 400 else "",
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
