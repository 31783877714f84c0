package dictsim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// EntriesHeader is the header line of an entries file.
var EntriesHeader = []string{"key", "key_type", "participant", "branch", "account", "account_type", "owner_type", "owner_tax_id", "owner_name"}

// The formats of the DICT API (OpenAPI 1.8.0): keys by type, ISPB,
// PI-PayerId, EndToEndId.
var (
	keyFormats = map[string]*regexp.Regexp{
		"CPF":   regexp.MustCompile(`^[0-9]{11}$`),
		"CNPJ":  regexp.MustCompile(`^[0-9A-Z]{12}[0-9]{2}$`), // alphanumeric since 2026
		"PHONE": regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`),
		"EMAIL": regexp.MustCompile(`^[a-z0-9.!#$&'*+/=?^_{|}~-]+@[a-z0-9-]+(\.[a-z0-9-]+)*$`),
		"EVP":   regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
	}
	ispbFormat  = regexp.MustCompile(`^[0-9]{8}$`)
	payerFormat = regexp.MustCompile(`^([0-9]{11}|[0-9A-Z]{12}[0-9]{2})$`)
	e2eFormat   = regexp.MustCompile(`^[EeDd][0-9]{8}[0-9]{12}[0-9A-Za-z]{11}$`)
)

// keyType returns the type of key, or "" for a malformed key.
func keyType(key string) string {
	for _, t := range []string{"CPF", "CNPJ", "PHONE", "EVP", "EMAIL"} {
		if keyFormats[t].MatchString(key) && len(key) <= 77 {
			return t
		}
	}
	return ""
}

// ReadEntries reads the directory's entries from CSV with EntriesHeader as
// its first line. An error names the line and the field.
func ReadEntries(r io.Reader) ([]Entry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(EntriesHeader)
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("dictsim: entries: header: %w", err)
	}
	if strings.Join(header, ",") != strings.Join(EntriesHeader, ",") {
		return nil, fmt.Errorf("dictsim: entries: header is %q, want %q", strings.Join(header, ","), strings.Join(EntriesHeader, ","))
	}
	var out []Entry
	seen := make(map[string]int)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("dictsim: entries: %w", err)
		}
		line, _ := cr.FieldPos(0)
		e, err := parseEntry(rec)
		if err != nil {
			return nil, fmt.Errorf("dictsim: entries: line %d: %w", line, err)
		}
		if prev, ok := seen[e.Key]; ok {
			return nil, fmt.Errorf("dictsim: entries: line %d: key %s already on line %d", line, e.Key, prev)
		}
		seen[e.Key] = line
		out = append(out, e)
	}
}

// LoadEntries reads the entries file at path (see ReadEntries).
func LoadEntries(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dictsim: entries: %w", err)
	}
	defer f.Close()
	return ReadEntries(f)
}

func parseEntry(rec []string) (Entry, error) {
	re, ok := keyFormats[rec[1]]
	switch {
	case !ok:
		return Entry{}, fmt.Errorf("key_type: %q is not CPF, CNPJ, PHONE, EMAIL or EVP", rec[1])
	case !re.MatchString(rec[0]):
		return Entry{}, fmt.Errorf("key: %q is not a %s key", rec[0], rec[1])
	case !ispbFormat.MatchString(rec[2]):
		return Entry{}, fmt.Errorf("participant: %q is not an ISPB", rec[2])
	case !payerFormat.MatchString(rec[7]):
		return Entry{}, fmt.Errorf("owner_tax_id: %q is not a CPF or CNPJ", rec[7])
	case (len(rec[7]) == 11) != (rec[6] == "NATURAL_PERSON"):
		return Entry{}, fmt.Errorf("owner_type: %q does not fit the tax id %s", rec[6], rec[7])
	case rec[4] == "" || rec[5] == "" || rec[8] == "":
		return Entry{}, errors.New("account, account_type and owner_name are required")
	}
	return Entry{
		Key:     rec[0],
		KeyType: rec[1],
		Account: Account{Participant: rec[2], Branch: rec[3], AccountNumber: rec[4], AccountType: rec[5]},
		Owner:   Owner{Type: rec[6], TaxIDNumber: rec[7], Name: rec[8]},
	}, nil
}
