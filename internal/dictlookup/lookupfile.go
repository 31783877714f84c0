package dictlookup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errLookupFormat is LookupFileFormat's error for a format other than
// "csv", "json" or "".
var errLookupFormat = errors.New("want csv or json")

// LookupFileFormat is the format of a lookups results file: format when
// given ("csv" or "json"), else JSON for a path ending in ".json" (any
// case) and CSV for any other. It reports whether the file is JSON.
func LookupFileFormat(format, path string) (asJSON bool, err error) {
	switch format {
	case "csv", "json":
		return format == "json", nil
	case "":
		return strings.EqualFold(filepath.Ext(path), ".json"), nil
	}
	return false, fmt.Errorf("format %q: %w", format, errLookupFormat)
}

// CreateLookupFile creates (or truncates) path and writes the header of a
// results file in CSV, or in JSON when asJSON. Its Close ends the records
// and closes the file.
func CreateLookupFile(path string, asJSON bool) (*LookupWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewLookupWriter(f, asJSON)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	w.file = f
	return w, nil
}
