package dictsim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/balde-throttle/balde/dict"
)

// EntriesHeader is the header line of an entries file.
var EntriesHeader = []string{"key", "key_type", "participant", "branch", "account", "account_type", "owner_type", "owner_tax_id", "owner_name"}

// ReadEntries reads the directory's entries from CSV with EntriesHeader as
// its first line. Every key, ISPB and tax id is validated; an error names
// the line and the field.
func ReadEntries(r io.Reader) ([]dict.Entry, error) {
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
	var out []dict.Entry
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
func LoadEntries(path string) ([]dict.Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dictsim: entries: %w", err)
	}
	defer f.Close()
	return ReadEntries(f)
}

func parseEntry(rec []string) (dict.Entry, error) {
	t, err := dict.ParseKeyType(rec[1])
	if err != nil {
		return dict.Entry{}, fmt.Errorf("key_type: %w", err)
	}
	k, err := dict.ParseKeyAs(t, rec[0])
	if err != nil {
		return dict.Entry{}, fmt.Errorf("key: %w", err)
	}
	if err := dict.ValidateISPB(rec[2]); err != nil {
		return dict.Entry{}, fmt.Errorf("participant: %w", err)
	}
	person, err := dict.ParsePayerID(rec[7])
	if err != nil {
		return dict.Entry{}, fmt.Errorf("owner_tax_id: %w", err)
	}
	if rec[6] != person.OwnerType() {
		return dict.Entry{}, fmt.Errorf("owner_type: %q, but the tax id is a %s's (want %s)", rec[6], person, person.OwnerType())
	}
	if rec[4] == "" || rec[5] == "" || rec[8] == "" {
		return dict.Entry{}, errors.New("account, account_type and owner_name are required")
	}
	return dict.Entry{
		Key:     k.Value,
		KeyType: k.Type,
		Account: dict.Account{Participant: rec[2], Branch: rec[3], AccountNumber: rec[4], AccountType: rec[5]},
		Owner:   dict.Owner{Type: rec[6], TaxIDNumber: rec[7], Name: rec[8]},
	}, nil
}
