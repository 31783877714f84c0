// setapi_gateway.js: drive balde's SIFEN gateway with the public SOAP client
// facturacionelectronicapy-setapi, unchanged: only the host of its
// hardcoded SIFEN URLs (https://sifen-test.set.gov.py,
// https://sifen.set.gov.py) is rewritten to the gateway's, as a DNS entry
// or an egress proxy does in a deployment. Its TLS agent stays: it shows
// the .p12's certificate, the gateway's client credential, and trusts the
// gateway's CA, given in setapi's own caCert option. Its timeout is its
// default (90 s).
//
// stdin: {"gateway": URL, "p12": FILE, "password": PW, "ca": CA.pem,
//         "lots": [{"id": N, "files": [DE.xml, ...]}],   → recibeLote (siRecepLoteDE)
//         "des": [{"id": N, "file": DE.xml}],             → recibe (siRecepDE)
//         "lotResults": [LOTNUMBER, ...],                 → consultaLote (siResultLoteDE)
//         "cdcs": [CDC, ...]}                             → consulta (siConsDE)
// stdout: one JSON line per request, in that order:
//   {"op", "id", "ok": true, "body": setapi's parsed answer} or {"op", "id", "ok": false, "error"}.
"use strict";
const fs = require("fs");
const axios = require("axios");

const spec = JSON.parse(fs.readFileSync(0, "utf8"));
const post = axios.post.bind(axios);
axios.post = (url, body, cfg) => post(String(url).replace(/^https:\/\/sifen(-test)?\.set\.gov\.py/, spec.gateway), body, cfg);
const setapi = require("facturacionelectronicapy-setapi").default;

// setapi drops each DE's first line, expecting the XML declaration on a
// line of its own: give it that.
function readDE(file) {
  return fs.readFileSync(file, "utf8").replace(/^(<\?xml[^>]*\?>)\s*/, "$1\n");
}

async function run(op, id, fn) {
  try {
    const body = await fn();
    process.stdout.write(JSON.stringify({ op, id, ok: true, body }) + "\n");
  } catch (e) {
    const error = e && e.response ? `HTTP ${e.response.status}: ${e.response.data}` : String(e && e.message ? e.message : e);
    process.stdout.write(JSON.stringify({ op, id, ok: false, error }) + "\n");
  }
}

async function main() {
  const cfg = { caCert: spec.ca };
  const tasks = [];
  // The lots and the single DEs of one process go out concurrently, as an
  // issuer's workers would send them.
  for (const lot of spec.lots || []) {
    tasks.push(run("recibeLote", lot.id, () => setapi.recibeLote(lot.id, lot.files.map(readDE), "test", spec.p12, spec.password, cfg)));
  }
  for (const de of spec.des || []) {
    tasks.push(run("recibe", de.id, () => setapi.recibe(de.id, readDE(de.file), "test", spec.p12, spec.password, cfg)));
  }
  await Promise.all(tasks);
  for (const lot of spec.lotResults || []) {
    await run("consultaLote", lot, () => setapi.consultaLote(1, lot, "test", spec.p12, spec.password, cfg));
  }
  for (const cdc of spec.cdcs || []) {
    await run("consulta", cdc, () => setapi.consulta(1, cdc, "test", spec.p12, spec.password, cfg));
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
