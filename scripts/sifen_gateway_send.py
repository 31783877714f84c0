#!/usr/bin/env python3
"""Send DEs to SIFEN through balde's SIFEN gateway and read their results.

Written like an issuer's tools/send_sirecepde.py (Python's standard library
only): the issuer's RUC is read from each DE (dRucEm), the DEs of one RUC are
packed into an rLoteDE (at most 50 per lot), zipped, base64-encoded into
rEnvioLote and posted as SOAP 1.2 to siRecepLoteDE; or each DE is posted
alone to siRecepDE. The gateway's URL replaces SIFEN's; nothing else changes.
The gateway holds a request while its RUC must wait; when it will not wait it
answers a SOAP fault with Retry-After (never a SIFEN code), and this script
waits that long and sends again, within --deadline; with --once it does not
(a client written for SIFEN alone, which does not retry).

The gateway serves its clients only: --token sends a bearer token, --cert and
--key a client certificate (as to SIFEN itself), --ca trusts the gateway's
certificate.

    sifen_gateway_send.py --url https://127.0.0.1:8082 --token T --ca ca.pem lot de1.xml de2.xml ...
    sifen_gateway_send.py --url https://127.0.0.1:8082 --cert c.pem --key k.pem --ca ca.pem de de1.xml ...
    sifen_gateway_send.py --url https://127.0.0.1:8082 --token T --ca ca.pem results 123456789012345 ...
    sifen_gateway_send.py --url https://127.0.0.1:8082 --token T --ca ca.pem cdc 0180069563100100100000011202601021000000101X ...

Prints one JSON line per request:
  lot:     {"ruc", "files", "status", "code", "message", "lot_number", "fault", "attempts"}
  de:      {"file", "status", "cdc", "result", "auth", "code", "message", "fault", "attempts"}
  results: {"lot_number", "status", "code", "results": [{"cdc", "result"}], "fault"}
  cdc:     {"cdc", "status", "code", "message", "fault"}
Exit status 1 when a lot was not queued or a DE not approved.
"""

import argparse
import base64
import io
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile

SOAP = "http://www.w3.org/2003/05/soap-envelope"
SIFEN = "http://ekuatia.set.gov.py/sifen/xsd"
RECEPCION_LOTE_PATH = "/de/ws/async/recibe-lote.wsdl"
RECEPCION_DE_PATH = "/de/ws/sync/recibe.wsdl"
RESULT_LOTE_PATH = "/de/ws/consultas/consulta-lote.wsdl"
CONSULTA_DE_PATH = "/de/ws/consultas/consulta.wsdl"
MAX_LOT_DES = 50


def envelope(body):
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<soap:Envelope xmlns:soap="%s"><soap:Header/><soap:Body>%s</soap:Body></soap:Envelope>'
            % (SOAP, body)).encode("utf-8")


# The client's credential and TLS (main sets them from the flags).
HEADERS = {"Content-Type": "application/soap+xml; charset=utf-8"}
CONTEXT = None


def post(url, payload, timeout):
    req = urllib.request.Request(url, data=payload, method="POST", headers=HEADERS)
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=CONTEXT) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def text(root, path):
    el = None if root is None else root.find(path)
    return "" if el is None or el.text is None else el.text.strip()


def s(name):
    return "{%s}%s" % (SIFEN, name)


def answer(status, headers, data):
    """Parse a SOAP answer: (root, out) with the status, a fault's reason and Retry-After."""
    out = {"status": status, "fault": "", "retry_after": headers.get("Retry-After") or ""}
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        out["fault"] = "not XML: %r" % data[:200]
        return None, out
    fault = root.find(".//{%s}Fault" % SOAP)
    if fault is not None:
        out["fault"] = text(fault, "{%s}Reason/{%s}Text" % (SOAP, SOAP))
    return root, out


def strip_declaration(xml_bytes):
    xml_bytes = xml_bytes.lstrip(b"\xef\xbb\xbf").strip()
    if xml_bytes.startswith(b"<?xml"):
        xml_bytes = xml_bytes[xml_bytes.index(b"?>") + 2:].strip()
    return xml_bytes


def ruc_of(xml_bytes):
    """dRucEm of a DE, as the seed's send_sirecepde reads it."""
    root = ET.fromstring(xml_bytes)
    el = root.find(".//" + s("dRucEm"))
    if el is None:
        el = root.find(".//dRucEm")
    return "" if el is None or el.text is None else el.text.strip()


def recepcion_lote(url, des, request_id, timeout):
    lot = b'<?xml version="1.0" encoding="UTF-8"?><rLoteDE>' + b"".join(strip_declaration(d) for d in des) + b"</rLoteDE>"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("lote.xml", lot)
    xde = base64.b64encode(buf.getvalue()).decode("ascii")
    body = '<rEnvioLote xmlns="%s"><dId>%d</dId><xDE>%s</xDE></rEnvioLote>' % (SIFEN, request_id, xde)
    root, out = answer(*post(url.rstrip("/") + RECEPCION_LOTE_PATH, envelope(body), timeout))
    res = None if root is None else root.find(".//" + s("rResEnviLoteDe"))
    out.update({"code": text(res, s("dCodRes")), "message": text(res, s("dMsgRes")),
                "lot_number": text(res, s("dProtConsLote"))})
    return out


def recepcion_de(url, de, request_id, timeout):
    body = '<rEnviDe xmlns="%s"><dId>%d</dId><xDE>%s</xDE></rEnviDe>' % (
        SIFEN, request_id, strip_declaration(de).decode("utf-8"))
    root, out = answer(*post(url.rstrip("/") + RECEPCION_DE_PATH, envelope(body), timeout))
    prot = None if root is None else root.find(".//" + s("rProtDe"))
    out.update({"cdc": text(prot, s("id")), "result": text(prot, s("dEstRes")), "auth": text(prot, s("dProtAut")),
                "code": text(prot, s("gResProc") + "/" + s("dCodRes")),
                "message": text(prot, s("gResProc") + "/" + s("dMsgRes"))})
    return out


def result_lote(url, lot_number, timeout):
    body = '<rEnviConsLoteDe xmlns="%s"><dId>1</dId><dProtConsLote>%s</dProtConsLote></rEnviConsLoteDe>' % (SIFEN, lot_number)
    root, out = answer(*post(url.rstrip("/") + RESULT_LOTE_PATH, envelope(body), timeout))
    res = None if root is None else root.find(".//" + s("rResEnviConsLoteDe"))
    out.update({"lot_number": lot_number, "code": text(res, s("dCodResLot")), "results": []})
    for r in ([] if res is None else res.findall(s("gResProcLote"))):
        out["results"].append({"cdc": text(r, s("id")), "result": text(r, s("dEstRes"))})
    return out


def consulta_de(url, cdc, timeout):
    body = '<rEnviConsDeRequest xmlns="%s"><dId>1</dId><dCDC>%s</dCDC></rEnviConsDeRequest>' % (SIFEN, cdc)
    root, out = answer(*post(url.rstrip("/") + CONSULTA_DE_PATH, envelope(body), timeout))
    res = None if root is None else root.find(".//" + s("rEnviConsDeResponse"))
    out.update({"cdc": cdc, "code": text(res, s("dCodRes")), "message": text(res, s("dMsgRes"))})
    return out


def with_retries(send, end, once):
    """Send until the gateway stops answering 429, waiting its Retry-After, before end."""
    attempts = 0
    while True:
        attempts += 1
        out = send()
        wait = int(out["retry_after"] or 0)
        if once or out["status"] != 429 or wait <= 0 or time.monotonic() + wait > end:
            out["attempts"] = attempts
            return out
        time.sleep(wait)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the gateway's base URL (SIFEN's, e.g. https://sifen-test.set.gov.py, without it)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per request (the gateway may hold one: its --hold and 15 s)")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds for the whole run")
    ap.add_argument("--once", action="store_true", help="send each request once, never again after a fault")
    ap.add_argument("--token", help="the client's bearer token")
    ap.add_argument("--cert", help="the client's certificate (PEM), with --key")
    ap.add_argument("--key", help="the key of --cert (PEM)")
    ap.add_argument("--ca", help="the CA bundle (PEM) the gateway's certificate is checked against")
    ap.add_argument("mode", choices=["lot", "de", "results", "cdc"])
    ap.add_argument("items", nargs="+", help="DE files (lot, de), lot numbers (results) or CDCs (cdc)")
    args = ap.parse_args()
    global CONTEXT
    if args.token:
        HEADERS["Authorization"] = "Bearer " + args.token
    if args.url.startswith("https:"):
        CONTEXT = ssl.create_default_context(cafile=args.ca)
        if args.cert:
            CONTEXT.load_cert_chain(args.cert, args.key)
    end = time.monotonic() + args.deadline
    failed = 0
    if args.mode == "results":
        for lot in args.items:
            print(json.dumps(result_lote(args.url, lot, args.timeout)), flush=True)
        return 0
    if args.mode == "cdc":
        for cdc in args.items:
            print(json.dumps(consulta_de(args.url, cdc, args.timeout)), flush=True)
        return 0
    docs = []
    for path in args.items:
        with open(path, "rb") as f:
            docs.append((path, f.read()))
    if args.mode == "de":
        for i, (path, de) in enumerate(docs):
            out = with_retries(lambda: recepcion_de(args.url, de, i + 1, args.timeout), end, args.once)
            out["file"] = path
            print(json.dumps(out), flush=True)
            failed += out["result"] not in ("Aprobado", "Aprobado con observación")
        return 1 if failed else 0
    # One lot per RUC, at most MAX_LOT_DES DEs each, in the order given.
    by_ruc = {}
    for path, de in docs:
        by_ruc.setdefault(ruc_of(de), []).append((path, de))
    request_id = 0
    for ruc, des in by_ruc.items():
        for k in range(0, len(des), MAX_LOT_DES):
            chunk = des[k:k + MAX_LOT_DES]
            request_id += 1
            out = with_retries(lambda: recepcion_lote(args.url, [d for _, d in chunk], request_id, args.timeout), end, args.once)
            out.update({"ruc": ruc, "files": [p for p, _ in chunk]})
            print(json.dumps(out), flush=True)
            failed += out["code"] != "0300"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
