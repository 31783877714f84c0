// gen.js: make signed SIFEN DEs with the third-party generator
// (facturacionelectronicapy-xmlgen) and signer (facturacionelectronicapy-xmlsign).
//
// stdin: {"p12": FILE, "password": PW, "out": DIR, "docs": [{"ruc": "80069563-1",
//   "tipo": 1, "numero": 1, "asociado": CDC (notes of credit/debit)}]}
// stdout: one JSON line per DE: {"file", "cdc", "ruc", "tipo"}.
"use strict";
const fs = require("fs");
const path = require("path");
const xmlgen = require("facturacionelectronicapy-xmlgen").default;
const xmlsign = require("facturacionelectronicapy-xmlsign").default;

function params(ruc) {
  return {
    version: 150,
    ruc: ruc,
    razonSocial: "DE generado en ambiente de prueba - sin valor comercial ni fiscal",
    nombreFantasia: "Empresa de prueba",
    actividadesEconomicas: [{ codigo: "62010", descripcion: "Actividades de programación informática" }],
    timbradoNumero: "12558946",
    timbradoFecha: "2025-01-01",
    tipoContribuyente: 2,
    tipoRegimen: 8,
    establecimientos: [{
      codigo: "001", direccion: "Avda. Mariscal López", numeroCasa: "1234",
      departamento: 1, departamentoDescripcion: "CAPITAL", distrito: 1, distritoDescripcion: "ASUNCION (DISTRITO)",
      ciudad: 1, ciudadDescripcion: "ASUNCION (DISTRITO)", telefono: "021000000", email: "facturacion@example.com.py",
      denominacion: "Casa central",
    }],
  };
}

function data(doc) {
  const d = {
    tipoDocumento: doc.tipo,
    establecimiento: "001",
    codigoSeguridadAleatorio: String(100000 + doc.numero),
    punto: "001",
    numero: String(doc.numero).padStart(7, "0"),
    fecha: "2026-01-02T10:00:00",
    tipoEmision: 1,
    tipoTransaccion: 1,
    tipoImpuesto: 1,
    moneda: "PYG",
    cliente: {
      contribuyente: true, ruc: "88888801-5", razonSocial: "Cliente de prueba", tipoOperacion: 1,
      direccion: "Calle Uno", numeroCasa: "1", departamento: 1, departamentoDescripcion: "CAPITAL",
      distrito: 1, distritoDescripcion: "ASUNCION (DISTRITO)", ciudad: 1, ciudadDescripcion: "ASUNCION (DISTRITO)",
      pais: "PRY", paisDescripcion: "Paraguay", tipoContribuyente: 1,
    },
    items: [{
      codigo: "A-001", descripcion: "Servicio de desarrollo", unidadMedida: 77, cantidad: 1,
      precioUnitario: 110000, ivaTipo: 1, ivaProporcion: 100, iva: 10, pais: "PRY", paisDescripcion: "Paraguay",
    }],
  };
  switch (doc.tipo) {
    case 1:
      d.factura = { presencia: 1 };
      d.condicion = { tipo: 1, entregas: [{ tipo: 1, monto: "110000", moneda: "PYG", cambio: 0 }] };
      break;
    case 5:
    case 6:
      d.notaCreditoDebito = { motivo: 1 };
      d.documentoAsociado = { formato: 1, cdc: doc.asociado };
      break;
    case 7:
      d.remision = { motivo: 1, tipoResponsable: 1, kms: 10, fechaFactura: "2026-01-02" };
      d.transporte = {
        tipo: 1, modalidad: 1, tipoResponsable: 1, inicioEstimadoTranslado: "2026-01-02", finEstimadoTranslado: "2026-01-03",
        salida: { direccion: "Avda. Mariscal López", numeroCasa: "1234", departamento: 1, departamentoDescripcion: "CAPITAL",
          distrito: 1, distritoDescripcion: "ASUNCION (DISTRITO)", ciudad: 1, ciudadDescripcion: "ASUNCION (DISTRITO)" },
        entrega: { direccion: "Calle Uno", numeroCasa: "1", departamento: 1, departamentoDescripcion: "CAPITAL",
          distrito: 1, distritoDescripcion: "ASUNCION (DISTRITO)", ciudad: 1, ciudadDescripcion: "ASUNCION (DISTRITO)" },
        vehiculo: { tipo: "Camión", marca: "Volvo", documentoTipo: 1, documentoNumero: "ABC123", numeroMatricula: "ABC123" },
        transportista: { contribuyente: true, nombre: "Transportes de prueba", ruc: "88888801-5", direccion: "Calle Dos",
          chofer: { documentoNumero: "1234567", nombre: "Chofer de prueba", direccion: "Calle Uno" } },
      };
      break;
  }
  return d;
}

async function main() {
  const spec = JSON.parse(fs.readFileSync(0, "utf8"));
  fs.mkdirSync(spec.out, { recursive: true });
  for (const doc of spec.docs) {
    const xml = await xmlgen.generateXMLDE(params(doc.ruc), data(doc), { test: true });
    const signed = await xmlsign.signXML(xml, spec.p12, spec.password, true);
    const cdc = /<DE Id="(\d{44})"/.exec(signed)[1];
    const file = path.join(spec.out, `de-${doc.ruc.split("-")[0]}-${doc.tipo}-${doc.numero}.xml`);
    fs.writeFileSync(file, signed);
    process.stdout.write(JSON.stringify({ file, cdc, ruc: doc.ruc, tipo: doc.tipo }) + "\n");
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
