// Package templates holds balde's HTML templates and static files, embedded
// in the binary. It is data only: package web parses the pages it declares
// and fails at start if a page file here is not declared there.
//
// Layout: layout.html defines "base", which calls the "title" and "content"
// templates that every page file defines; partials/ holds shared fragments;
// static/ is served as is under /static/.
package templates

import "embed"

// FS holds the page files (*.html), partials/*.html and static/*.
//
//go:embed *.html partials/*.html static/*
var FS embed.FS
