// Package web is balde's HTTP face: the admin pages of bucket states, the
// SIFEN documents pages, the DICT lookup page, the DICT-format /policies/
// endpoints over the local mirror, the JSON endpoints for monitors,
// /metrics, the probes, the DICT and SIFEN gateways, and the inbound
// limiter that protects all of them.
//
// Every route is declared in one table (routes.go). Handlers return
// errors and never write an error response themselves: errors.go is the
// one place that turns an error into a status and an HTML, JSON, DICT
// problem-XML or SOAP body.
package web
