package dictlookup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errLookupFormat is LookupFileFormat's error for another format.
var errLookupFormat = errors.New("want csv or json")

// LookupFileFormat reports whether a results file is JSON: format when
// given ("csv" or "json"), else whether path ends in ".json".
func LookupFileFormat(format, path string) (asJSON bool, err error) {
	switch format {
	case "csv", "json":
		return format == "json", nil
	case "":
		return strings.EqualFold(filepath.Ext(path), ".json"), nil
	}
	return false, fmt.Errorf("format %q: %w", format, errLookupFormat)
}

// CreateLookupFile creates path and starts a results file in it.
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
