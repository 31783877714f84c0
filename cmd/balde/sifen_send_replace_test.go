package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

// Issue 22 item 6: a file whose CDC a draft or error of the database holds
// with other content is not silently taken (on the old code the last file
// won): the run says so and does not send it; --replace gives the document
// the file's content and sends it.
func TestSifenSendReplace(t *testing.T) {
	clock := newFakeTime(testEpoch)
	sim := startSifenSim(t, sifensim.Config{Clock: clock.Now})
	doc := sifentest.Doc{RUC: "80069563", Number: 1}
	other := doc
	other.Filler = 10 // the same CDC, other content
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	ctx := context.Background()

	// SIFEN cannot be reached: the document stays, in error.
	dead := map[string]string{"BALDE_SIFEN_URL": "http://127.0.0.1:1/{env}", "BALDE_DB": db}
	code, _, stderr := runIn(ctx, clock, "", dead, "sifen-send", "--no-wait", writeFile(t, t.TempDir(), "de.xml", doc.File()))
	require.NotEqual(t, ExitOK, code, stderr)
	require.Equal(t, map[string]int{"error": 1}, documentStatuses(t, db))

	env := map[string]string{"BALDE_SIFEN_URL": sim.URL, "BALDE_DB": db}
	file := writeFile(t, t.TempDir(), "de.xml", other.File())
	code, stdout, stderr := runIn(ctx, clock, "", env, "sifen-send", "--json", file)
	require.NotEqual(t, ExitOK, code, "a refused document is not a success: %s", stderr)
	items, sum := jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, report.Summary{Total: 1, Invalid: 1}, sum)
	require.Contains(t, items[0].Message, "is already document 1, an error with other content")
	require.Contains(t, items[0].Message, "(sifen-send --replace)")
	require.Zero(t, sim.Stats().Count("siRecepLoteDE", "", "", ""))

	code, stdout, stderr = runIn(ctx, clock, "", env, "sifen-send", "--json", "--replace", file)
	require.Equal(t, ExitOK, code, stderr)
	_, sum = jsonLines[report.SifenRecord](t, stdout)
	require.Equal(t, 1, sum.Sent, "after the interval since the failed request (%v s)", sum.WaitS)
	require.Equal(t, map[string]int{other.CDC(): 1}, sim.queuedCounts())
}
