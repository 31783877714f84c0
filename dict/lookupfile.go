package dict

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrLookupFormat is LookupFileFormat's error for a format other than
// "csv", "json" or "".
var ErrLookupFormat = errors.New("want csv or json")

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
	return false, fmt.Errorf("format %q: %w", format, ErrLookupFormat)
}

// LookupFile is a LookupWriter on a file it created; Close ends the
// records (the JSON array's bracket, the CSV buffer) and closes the file.
type LookupFile struct {
	*LookupWriter
	f *os.File
}

// CreateLookupFile creates (or truncates) path and writes the header of a
// results file in CSV, or in JSON when asJSON.
func CreateLookupFile(path string, asJSON bool) (*LookupFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewLookupWriter(f, asJSON)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &LookupFile{w, f}, nil
}

// Close ends the records and closes the file; it returns the first
// failure of either.
func (lf *LookupFile) Close() error { return errors.Join(lf.LookupWriter.Close(), lf.f.Close()) }
