// verify.js: check the XML signature of every rDE in a lot ZIP as sent to
// SIFEN (the xDE, base64, one per line on stdin), with xml-crypto and the
// certificate each signature carries. stdout: one JSON line per DE:
// {"cdc", "valid", "error"}. Exit 1 when any signature does not verify.
"use strict";
const fs = require("fs");
const JSZip = require("jszip");
const { DOMParser } = require("@xmldom/xmldom");
const { SignedXml } = require("xml-crypto");

const DSIG = "http://www.w3.org/2000/09/xmldsig#";

function pem(b64) {
  return "-----BEGIN CERTIFICATE-----\n" + b64.replace(/\s+/g, "").match(/.{1,64}/g).join("\n") + "\n-----END CERTIFICATE-----\n";
}

async function main() {
  let bad = 0;
  const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.trim() !== "");
  for (const line of lines) {
    const zip = await JSZip.loadAsync(Buffer.from(line.trim(), "base64"));
    const names = Object.keys(zip.files);
    const lot = await zip.file(names[0]).async("string");
    // Each rDE, verified as it stands in the lot.
    const re = /<rDE[\s>][\s\S]*?<\/rDE>/g;
    let m;
    while ((m = re.exec(lot)) !== null) {
      const rde = m[0];
      const doc = new DOMParser().parseFromString(rde, "text/xml");
      const sigNode = doc.getElementsByTagNameNS(DSIG, "Signature")[0];
      const cdc = (/<DE Id="(\d{44})"/.exec(rde) || [])[1];
      let valid = false, error = "";
      try {
        const cert = doc.getElementsByTagNameNS(DSIG, "X509Certificate")[0].textContent;
        const sig = new SignedXml({ publicCert: pem(cert) });
        sig.loadSignature(sigNode);
        valid = sig.checkSignature(rde);
      } catch (e) {
        error = String(e && e.message ? e.message : e);
      }
      if (!valid) bad++;
      process.stdout.write(JSON.stringify({ cdc, valid, error }) + "\n");
    }
  }
  process.exit(bad > 0 ? 1 : 0);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
