// Sends lots through balde's SIFEN gateway with facturacionelectronicapy-setapi
// (npm), the Node client Paraguayan issuers use, unchanged: only the host of
// its hardcoded SIFEN URL is rewritten to the gateway's (as a DNS entry or an
// egress proxy would do in production).
//
//   NODE_PATH=DIR/node_modules node setapi_send.js GATEWAY_URL CERT.p12 PASS ID DE.xml... [-- ID DE.xml...]
//
// DIR holds `npm install facturacionelectronicapy-setapi@1.0.38`. Each
// "ID DE.xml..." group is one lot (recibeLote), sent in turn; one JSON line
// is printed per lot: {"id", "ok", "body"} with setapi's parsed answer, or
// {"id", "ok": false, "error"}.
const fs = require("fs");
const axios = require("axios");
const setapi = require("facturacionelectronicapy-setapi").default;

const [gateway, cert, pass, ...rest] = process.argv.slice(2);
const post = axios.post;
axios.post = (url, data, config) =>
  post(url.replace(/^https:\/\/sifen(-test)?\.set\.gov\.py/, gateway), data, config);

const lots = [];
let cur = null;
for (const a of rest) {
  if (a === "--") { cur = null; continue; }
  if (cur === null) { cur = { id: Number(a), files: [] }; lots.push(cur); continue; }
  cur.files.push(a);
}

(async () => {
  for (const lot of lots) {
    const xmls = lot.files.map((f) => fs.readFileSync(f, "utf8"));
    try {
      const body = await setapi.recibeLote(lot.id, xmls, "test", cert, pass, { timeout: 60000 });
      console.log(JSON.stringify({ id: lot.id, ok: true, body }));
    } catch (err) {
      console.log(JSON.stringify({ id: lot.id, ok: false, error: String(err && err.message ? err.message : err) }));
    }
  }
})();
