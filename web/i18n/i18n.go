// Package i18n holds the messages of balde's admin pages and operator
// commands in English, Portuguese (Brazil) and Spanish (Paraguay), and
// picks a language from an Accept-Language header or a LANG variable.
//
// It is built on golang.org/x/text/message (catalogs, plural rules, number
// formatting per language) and golang.org/x/text/language (matching
// Accept-Language against the supported tags), the Go team's own i18n
// packages, rather than hand-rolled maps.
//
// Adding a message: write it in English where it is used
// (p.Sprintf("Bucket states")) and add one line per language to the
// messages table in messages.go — the one place the catalog lives. A key
// with no translation prints in English.
package i18n

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// The supported languages; English is the fallback.
var (
	English    = language.English
	Portuguese = language.BrazilianPortuguese
	Spanish    = language.MustParse("es-PY")
	supported  = []language.Tag{English, Portuguese, Spanish}
	matcher    = language.NewMatcher(supported)
)

// Catalog is the message catalog of every supported language.
var Catalog = buildCatalog()

func buildCatalog() catalog.Catalog {
	b := catalog.NewBuilder(catalog.Fallback(English))
	for _, m := range messages {
		for i, tag := range []language.Tag{Portuguese, Spanish} {
			if m[i+1] == "" {
				continue
			}
			if err := b.SetString(tag, m[0], m[i+1]); err != nil {
				panic(fmt.Sprintf("i18n: %q: %v", m[0], err)) // a typo in messages.go, caught by the tests
			}
		}
	}
	for _, pm := range plurals {
		for i, tag := range []language.Tag{English, Portuguese, Spanish} {
			if err := b.Set(tag, pm.key, pm.forms[i]); err != nil {
				panic(fmt.Sprintf("i18n: %q: %v", pm.key, err))
			}
		}
	}
	return b
}

// Printer formats messages and times for one language and time zone.
// The zero value is not usable; use New.
type Printer struct {
	p *message.Printer
	// Tag is the language chosen.
	Tag language.Tag
	// Zone is where times are shown next to UTC (nil: UTC only).
	Zone *time.Location
}

// New returns a Printer for tag (matched to a supported language) showing
// times in zone.
func New(tag language.Tag, zone *time.Location) *Printer {
	_, i, _ := matcher.Match(tag)
	t := supported[i]
	return &Printer{p: message.NewPrinter(t, message.Catalog(Catalog)), Tag: t, Zone: zone}
}

// FromAcceptLanguage picks the best supported language for an
// Accept-Language header ("" or garbage: English).
func FromAcceptLanguage(header string, zone *time.Location) *Printer {
	tags, _, _ := language.ParseAcceptLanguage(header)
	if len(tags) == 0 {
		return New(English, zone)
	}
	_, i, _ := matcher.Match(tags...)
	return New(supported[i], zone)
}

// FromLocale picks the language of a POSIX locale such as LANG or LC_ALL
// ("pt_BR.UTF-8", "es_PY", "C"): English when it names none supported.
func FromLocale(locale string, zone *time.Location) *Printer {
	l := locale
	if i := strings.IndexAny(l, ".@"); i >= 0 {
		l = l[:i]
	}
	tag, err := language.Parse(strings.ReplaceAll(l, "_", "-"))
	if err != nil || l == "C" || l == "POSIX" {
		return New(English, zone)
	}
	return New(tag, zone)
}

// Sprintf formats the message key (an English format string) in the
// printer's language.
func (p *Printer) Sprintf(key string, args ...any) string {
	return p.p.Sprintf(key, args...)
}

// Text translates a fixed text (a title, a label) that is not a format:
// one containing "%" is returned as it is, never formatted.
func (p *Printer) Text(key string) string {
	if strings.Contains(key, "%") {
		return key
	}
	return p.p.Sprintf(key)
}

// Lang is the language's BCP 47 tag, for <html lang>.
func (p *Printer) Lang() string { return p.Tag.String() }

// TimeLayout is how instants are shown in UTC.
const TimeLayout = "2006-01-02 15:04:05 UTC"

// Time renders t in UTC and, when the printer's zone is not UTC, in that
// zone too: "2026-03-02 12:00:00 UTC (09:00:00 -03)".
func (p *Printer) Time(t time.Time) string {
	s := t.UTC().Format(TimeLayout)
	if p.Zone != nil && p.Zone != time.UTC {
		local := t.In(p.Zone)
		if _, off := local.Zone(); off != 0 {
			s += " (" + local.Format("15:04:05 MST") + ")"
		}
	}
	return s
}
