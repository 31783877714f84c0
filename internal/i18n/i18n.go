// Package i18n holds the messages of balde's admin pages and operator
// commands in English, Portuguese (Brazil) and Spanish (Paraguay), and
// picks a language from an Accept-Language header or a LANG variable.
//
// It is built on golang.org/x/text/message (catalogs, plural rules, number
// formatting) and golang.org/x/text/language (matching).
//
// Adding a message: write it in English where it is used
// (p.Sprintf("Bucket states")) and add one line per language to the
// messages table in messages.go — the one place the catalog lives. A key
// with no translation prints in English.
package i18n

import (
	"cmp"
	"fmt"
	"slices"
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

// Format translates key formatted with args, or, without args, as a fixed
// text (Text): for messages built before the language is known (the
// summary panels, computed once for every reader).
//
// Numbers among args are formatted in the language (Int's separators); a
// Share argument is rendered as PerMille renders it ("39,3 %"), for a %s.
func (p *Printer) Format(key string, args []any) string {
	if len(args) == 0 {
		return p.Text(key)
	}
	local := make([]any, len(args))
	for i, a := range args {
		if sh, ok := a.(Share); ok {
			a = p.PerMille(int64(sh))
		}
		local[i] = a
	}
	return p.p.Sprintf(key, local...)
}

// Share is a share in per mille (393 is 39.3 %) passed to Format, which
// renders it in the reader's language.
type Share int64

// Has reports whether key is in the catalog (has translations).
func Has(key string) bool { return slices.Contains(Keys(), key) }

// Keys returns the catalog's keys, the English texts, in the order of the
// catalog: what a test of a Portuguese or Spanish page looks for to find
// English left on it.
func Keys() []string {
	out := make([]string, 0, len(messages)+len(plurals))
	for _, msg := range messages {
		out = append(out, msg[0])
	}
	for _, pm := range plurals {
		out = append(out, pm.key)
	}
	return out
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

// Int renders n with the language's thousands separator: "25,000" in
// English, "25.000" in Portuguese and Spanish.
func (p *Printer) Int(n int64) string { return p.p.Sprintf("%d", n) }

// PerMille renders a share given in per mille as a percentage with one
// decimal in the language's notation: 393 is "39.3 %" in English and
// "39,3 %" in Portuguese and Spanish.
func (p *Printer) PerMille(pm int64) string {
	return p.p.Sprintf("%.1f %%", float64(pm)/10)
}

// ZonedLayout is how Zoned shows an instant: the date and time in the
// printer's zone and the zone's abbreviation ("-03", "UTC").
const ZonedLayout = "2006-01-02 15:04:05 MST"

// Zoned renders t in the printer's zone alone, for the web pages an
// operator reads in their own time: "2026-03-02 09:00:00 -03" in
// America/Asuncion, "2026-03-02 12:00:00 UTC" when the zone is UTC or nil.
func (p *Printer) Zoned(t time.Time) string {
	return t.In(p.Location()).Format(ZonedLayout)
}

// ZoneName names the printer's zone for a page's "times in" note:
// "America/Asuncion (-03)", or "UTC".
func (p *Printer) ZoneName(at time.Time) string {
	z := p.Location()
	abbr, _ := at.In(z).Zone()
	name := z.String()
	if name == "Local" {
		// The server's own zone under no name: its abbreviation says it.
		return abbr
	}
	if name == abbr {
		return name
	}
	return name + " (" + abbr + ")"
}

// Location is the zone Zoned shows times in (UTC when none was given).
func (p *Printer) Location() *time.Location { return cmp.Or(p.Zone, time.UTC) }
