// setapi.js: run the public SOAP client facturacionelectronicapy-setapi
// against a SIFEN simulator. The client's URLs are fixed to SIFEN's hosts
// (https://sifen-test.set.gov.py, https://sifen.set.gov.py): they are
// rewritten to the simulator's base URL (argv[2], e.g.
// http://127.0.0.1:PORT/test) in axios, which the client uses, and its
// TLS agent is dropped. Nothing else of the client is touched.
//
//   node setapi.js BASE recibeLote P12 PASSWORD FILE...   → the answer as JSON
//   node setapi.js BASE consultaLote P12 PASSWORD LOTNUMBER
"use strict";
const fs = require("fs");
const axios = require("axios");

const [base, op, p12, password, ...rest] = process.argv.slice(2);
const post = axios.post.bind(axios);
axios.post = (url, body, cfg) => {
  const u = String(url).replace(/^https:\/\/sifen(-test)?\.set\.gov\.py/, base);
  const c = Object.assign({}, cfg);
  delete c.httpsAgent;
  return post(u, body, c);
};
const setapi = require("facturacionelectronicapy-setapi").default;

async function main() {
  let out;
  switch (op) {
    case "recibeLote":
      // The client drops each DE's first line, expecting the XML
      // declaration on a line of its own: give it that.
      out = await setapi.recibeLote(1, rest.map((f) => fs.readFileSync(f, "utf8").replace(/^(<\?xml[^>]*\?>)\s*/, "$1\n")), "test", p12, password, {});
      break;
    case "consultaLote":
      out = await setapi.consultaLote(2, rest[0], "test", p12, password, {});
      break;
    default:
      throw new Error("unknown operation " + op);
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
