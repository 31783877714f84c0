#!/usr/bin/env python3
"""Send lots to SIFEN's siRecepLoteDE through balde's SIFEN gateway.

Written like an issuer's send_sirecepde.py (Python's standard library only):
the lot file (an rLoteDE of signed DEs) is zipped, base64-encoded into
rEnvioLote and posted as SOAP 1.2. The gateway's URL replaces SIFEN's;
nothing else changes. The gateway holds a lot while its RUC must wait; when
it will not wait it answers a SOAP fault with Retry-After (never a SIFEN
code), and this script waits that long and sends again, within --deadline.

    send_sirecepde.py --url http://127.0.0.1:8082 lote1.xml lote2.xml
    send_sirecepde.py --url http://127.0.0.1:8082 --results 123456789012345

Prints one JSON line per lot: {"file", "status", "code", "message",
"lot_number", "fault", "retry_after", "attempts"}; with --results, one line
per lot number: {"lot_number", "status", "code", "results": [{"cdc",
"result"}]}.
"""

import argparse
import base64
import io
import json
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zipfile

SOAP = "http://www.w3.org/2003/05/soap-envelope"
SIFEN = "http://ekuatia.set.gov.py/sifen/xsd"
RECEPCION_PATH = "/de/ws/async/recibe-lote.wsdl"
RESULT_PATH = "/de/ws/consultas/consulta-lote.wsdl"


def envelope(body):
    return ('<?xml version="1.0" encoding="UTF-8"?>'
            '<soap:Envelope xmlns:soap="%s"><soap:Header/><soap:Body>%s</soap:Body></soap:Envelope>'
            % (SOAP, body)).encode("utf-8")


def post(url, payload, timeout):
    req = urllib.request.Request(url, data=payload, method="POST",
                                 headers={"Content-Type": "application/soap+xml; charset=utf-8"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def text(root, path):
    el = root.find(path)
    return "" if el is None or el.text is None else el.text.strip()


def recepcion_lote(url, lot_xml, request_id, timeout):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("lote.xml", lot_xml)
    xde = base64.b64encode(buf.getvalue()).decode("ascii")
    body = '<rEnvioLote xmlns="%s"><dId>%d</dId><xDE>%s</xDE></rEnvioLote>' % (SIFEN, request_id, xde)
    status, headers, data = post(url.rstrip("/") + RECEPCION_PATH, envelope(body), timeout)
    root = ET.fromstring(data)
    out = {"status": status, "code": "", "message": "", "lot_number": "", "fault": "",
           "retry_after": headers.get("Retry-After") or ""}
    fault = root.find(".//{%s}Fault" % SOAP)
    if fault is not None:
        out["fault"] = text(fault, "{%s}Reason/{%s}Text" % (SOAP, SOAP))
        return out
    res = root.find(".//{%s}rResEnviLoteDe" % SIFEN)
    out["code"] = text(res, "{%s}dCodRes" % SIFEN)
    out["message"] = text(res, "{%s}dMsgRes" % SIFEN)
    out["lot_number"] = text(res, "{%s}dProtConsLote" % SIFEN)
    return out


def result_lote(url, lot_number, timeout):
    body = ('<rEnviConsLoteDe xmlns="%s"><dId>1</dId><dProtConsLote>%s</dProtConsLote></rEnviConsLoteDe>'
            % (SIFEN, lot_number))
    status, headers, data = post(url.rstrip("/") + RESULT_PATH, envelope(body), timeout)
    root = ET.fromstring(data)
    out = {"lot_number": lot_number, "status": status, "code": "", "results": [],
           "retry_after": headers.get("Retry-After") or ""}
    res = root.find(".//{%s}rResEnviConsLoteDe" % SIFEN)
    if res is None:
        return out
    out["code"] = text(res, "{%s}dCodResLot" % SIFEN)
    for r in res.findall("{%s}gResProcLote" % SIFEN):
        out["results"].append({"cdc": text(r, "{%s}id" % SIFEN), "result": text(r, "{%s}dEstRes" % SIFEN)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="the gateway's base URL")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per request (the gateway may hold a lot)")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds for the whole run")
    ap.add_argument("--results", action="store_true", help="the arguments are lot numbers: read their results")
    ap.add_argument("items", nargs="+")
    args = ap.parse_args()
    end = time.monotonic() + args.deadline
    if args.results:
        for lot in args.items:
            print(json.dumps(result_lote(args.url, lot, args.timeout)), flush=True)
        return 0
    failed = 0
    for i, path in enumerate(args.items):
        with open(path, "rb") as f:
            lot_xml = f.read()
        attempts = 0
        while True:
            attempts += 1
            out = recepcion_lote(args.url, lot_xml, i + 1, args.timeout)
            wait = int(out["retry_after"] or 0)
            if out["status"] != 429 or wait <= 0 or time.monotonic() + wait > end:
                break
            time.sleep(wait)
        out.update({"file": path, "attempts": attempts})
        print(json.dumps(out), flush=True)
        failed += out["code"] != "0300"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
