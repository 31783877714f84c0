package dictlookup_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/dictlookup"
)

func TestLookupFileFormat(t *testing.T) {
	for _, tc := range []struct {
		format, path string
		json         bool
		err          error
	}{
		{"", "out.csv", false, nil},
		{"", "OUT.JSON", true, nil},
		{"", "out", false, nil},
		{"csv", "out.json", false, nil},
		{"json", "out.csv", true, nil},
		{"xml", "out.xml", false, dictlookup.ErrLookupFormat},
	} {
		got, err := dictlookup.LookupFileFormat(tc.format, tc.path)
		require.ErrorIs(t, err, tc.err, "%q %q", tc.format, tc.path)
		require.Equal(t, tc.json, got, "%q %q", tc.format, tc.path)
	}
}

func TestCreateLookupFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	lf, err := dictlookup.CreateLookupFile(path, true)
	require.NoError(t, err)
	require.NoError(t, lf.Write(dictlookup.LookupRecord{Key: "+5561988880000", Result: dictlookup.LookupSent}))
	require.NoError(t, lf.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var recs []map[string]any
	require.NoError(t, json.Unmarshal(b, &recs), "Close ends the JSON array: %s", b)
	require.Len(t, recs, 1)
	require.Equal(t, "+5561988880000", recs[0]["key"])

	csvPath := filepath.Join(dir, "out.csv")
	lf, err = dictlookup.CreateLookupFile(csvPath, false)
	require.NoError(t, err)
	require.NoError(t, lf.Close())
	b, err = os.ReadFile(csvPath)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "key,"), "the header alone: %q", b)

	_, err = dictlookup.CreateLookupFile(filepath.Join(dir, "missing", "out.csv"), false)
	require.ErrorIs(t, err, os.ErrNotExist)
}
