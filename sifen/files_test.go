package sifen_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

func writeXML(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

func TestXMLFiles(t *testing.T) {
	dir := t.TempDir()
	b := writeXML(t, dir, "b.xml", nil)
	a := writeXML(t, dir, "a.XML", nil)
	writeXML(t, dir, "notes.txt", nil)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub.xml"), 0o700))
	empty := t.TempDir()

	tests := []struct {
		name    string
		paths   []string
		want    []string
		wantErr string
	}{
		{"DirInNameOrderNoSubdirs", []string{dir}, []string{a, b}, ""},
		{"FileAsIsOnceOnly", []string{b, dir, filepath.Join(dir, ".", "b.xml")}, []string{b, a}, ""},
		{"Missing", []string{filepath.Join(dir, "nope.xml")}, nil, "nope.xml: no such file or directory"},
		{"EmptyDir", []string{empty}, nil, empty + ": no .xml file in the directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sifen.XMLFiles(tt.paths)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	lot := writeXML(t, dir, "lot.xml", sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2}))
	good := writeXML(t, dir, "good.xml", sifentest.Doc{Number: 3}.File())
	again := writeXML(t, dir, "again.xml", sifentest.Doc{Number: 1}.File())
	badDV := writeXML(t, dir, "bad_dv.xml", sifentest.Doc{Number: 4, BadDV: true}.File())
	unsigned := writeXML(t, dir, "unsigned.xml", sifentest.Doc{Number: 5, Unsigned: true}.File())
	huge := writeXML(t, dir, "huge.xml", append(sifentest.Doc{Number: 6}.File(), bytes.Repeat([]byte(" "), sifen.MaxFileSize)...))

	type want struct {
		file string
		err  string // substring of FileDE.Err, "" for none
	}
	tests := []struct {
		name          string
		files         []string
		env           sifen.Env
		allowUnsigned bool
		want          []want
	}{
		{"LotGivesEachDE", []string{lot, good}, sifen.EnvTest, false, []want{{lot, ""}, {lot, ""}, {good, ""}}},
		{"CDCGivenTwice", []string{lot, again}, sifen.EnvTest, false, []want{{lot, ""}, {lot, ""}, {again, "again.xml: CDC " + sifentest.Doc{Number: 1}.CDC() + " is also in " + lot}}},
		{"WrongCheckDigit", []string{badDV, good}, sifen.EnvTest, false, []want{{badDV, "bad_dv.xml: sifen: wrong RUC check digit"}, {good, ""}}},
		{"Unsigned", []string{unsigned}, sifen.EnvTest, false, []want{{unsigned, "not signed"}}},
		{"UnsignedAllowedInTest", []string{unsigned}, sifen.EnvTest, true, []want{{unsigned, ""}}},
		{"TestDEToProd", []string{good}, sifen.EnvProd, false, []want{{good, "cannot go to prod"}}},
		{"TooBig", []string{huge}, sifen.EnvTest, false, []want{{huge, "huge.xml: larger than 8 MB"}}},
		{"Missing", []string{filepath.Join(dir, "nope.xml")}, sifen.EnvTest, false, []want{{filepath.Join(dir, "nope.xml"), "no such file"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			des := sifen.ReadFiles(context.Background(), tt.files, tt.env, tt.allowUnsigned)
			require.Len(t, des, len(tt.want))
			for i, w := range tt.want {
				require.Equal(t, w.file, des[i].File)
				if w.err == "" {
					require.NoError(t, des[i].Err)
					require.NotEmpty(t, des[i].DE.CDC)
					continue
				}
				var fe *sifen.FileError
				require.ErrorAs(t, des[i].Err, &fe)
				require.ErrorContains(t, des[i].Err, w.err)
			}
		})
	}
}

// failingImport stands for a store that fails after n imports.
func failingImport(s *sifen.Sender, n int) func(context.Context, []byte, sifen.Env) ([]sifen.Document, error) {
	return func(ctx context.Context, data []byte, env sifen.Env) ([]sifen.Document, error) {
		if n == 0 {
			return nil, throttle.ErrStoreUnavailable
		}
		n--
		return s.Import(ctx, data, env)
	}
}

func TestImportFiles(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	dir := t.TempDir()
	lot := writeXML(t, dir, "lot.xml", sifentest.Lote(sifentest.Doc{Number: 1}, sifentest.Doc{Number: 2}))
	des := sifen.ReadFiles(ctx, []string{lot}, sifen.EnvTest, false)
	requireNoErr(t, des)

	// First run: both DEs become drafts.
	got, err := w.sender.ImportFiles(ctx, des, sifen.EnvTest, false)
	require.NoError(t, err)
	require.Len(t, got, 2)
	for i, im := range got {
		require.NoError(t, im.Err)
		require.Equal(t, lot, im.File)
		require.Equal(t, des[i].DE.CDC, im.Document.CDC)
		require.Equal(t, sifen.StatusDraft, w.doc(t, im.Document.ID).Status)
	}

	// A rerun after the first was sent: it is reported as held by its
	// document, without refusing the second, still a draft.
	out, err := w.sender.Send(ctx, got[0].Document.ID)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)
	again, err := w.sender.ImportFiles(ctx, des, sifen.EnvTest, false)
	require.NoError(t, err)
	require.Len(t, again, 2)
	var held *sifen.CDCError
	require.ErrorAs(t, again[0].Err, &held)
	require.Equal(t, got[0].Document.ID, again[0].Document.ID)
	require.Equal(t, sifen.StatusSent, again[0].Document.Status)
	require.NoError(t, again[1].Err)
	require.Equal(t, sifen.StatusDraft, again[1].Document.Status)

	// Other content under the second DE's CDC, still a draft: refused by
	// Import, taken by ImportReplacing (sifen-send --replace).
	changed := sifentest.Doc{Number: 2}
	changed.Filler = 10
	other := sifen.ReadFiles(ctx, []string{writeXML(t, dir, "changed.xml", changed.File())}, sifen.EnvTest, false)
	requireNoErr(t, other)
	refused, err := w.sender.ImportFiles(ctx, other, sifen.EnvTest, false)
	require.NoError(t, err)
	require.ErrorAs(t, refused[0].Err, &held)
	require.Equal(t, sifen.StatusDraft, refused[0].Document.Status)
	replaced, err := w.sender.ImportFiles(ctx, other, sifen.EnvTest, true)
	require.NoError(t, err)
	require.NoError(t, replaced[0].Err)
	require.Equal(t, got[1].Document.ID, replaced[0].Document.ID)

	// The store fails on the second DE: the first is reported, the error
	// stops the rest.
	w2 := newWorld(t, sqlstore.SQLite, worldConfig{})
	part, err := sifen.ImportFilesWith(ctx, failingImport(w2.sender, 1), des, sifen.EnvTest)
	require.ErrorIs(t, err, throttle.ErrStoreUnavailable)
	require.Len(t, part, 1)
	require.NoError(t, part[0].Err)

	// A cancelled context stops before the first DE.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	none, err := w2.sender.ImportFiles(cctx, des, sifen.EnvTest, false)
	require.True(t, errors.Is(err, context.Canceled))
	require.Empty(t, none)

	// A DE ReadFiles refused is never imported.
	bogus := []sifen.FileDE{{File: "x.xml", Err: &sifen.FileError{File: "x.xml", Err: sifen.ErrMalformedXML}}}
	_, err = w2.sender.ImportFiles(ctx, bogus, sifen.EnvTest, false)
	require.ErrorIs(t, err, sifen.ErrMalformedXML)
}

// TestSendFiles: one call runs sifen-send's batch: each DE imported (told
// in order; a CDC already sent is reported with its document, not sent
// again), then the drafts sent through their RUC's gate, waiting it out.
func TestSendFiles(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, sqlstore.SQLite, worldConfig{})
	dir := t.TempDir()
	first := writeXML(t, dir, "a.xml", sifentest.Doc{Number: 1}.File())
	des := sifen.ReadFiles(ctx, []string{first}, sifen.EnvTest, false)
	requireNoErr(t, des)
	imported, results, err := w.sender.SendFiles(ctx, des, sifen.EnvTest, sifen.BatchConfig{Clock: w.clock.Now})
	require.NoError(t, err)
	require.Len(t, imported, 1)
	require.NoError(t, imported[0].Err)
	require.Len(t, results, 1)
	require.Equal(t, sifen.BatchSent, results[0].Result)

	second := writeXML(t, dir, "b.xml", sifentest.Doc{Number: 2}.File())
	des = sifen.ReadFiles(ctx, []string{first, second}, sifen.EnvTest, false)
	requireNoErr(t, des)
	var kinds []sifen.EventKind
	var slept []time.Duration
	imported, results, err = w.sender.SendFiles(ctx, des, sifen.EnvTest, sifen.BatchConfig{Wait: true, Clock: w.clock.Now, Sleep: w.sleepOn(&slept),
		Progress: func(e sifen.Event) { kinds = append(kinds, e.Kind) }})
	require.NoError(t, err)
	var held *sifen.CDCError
	require.ErrorAs(t, imported[0].Err, &held)
	require.Equal(t, sifen.StatusSent, imported[0].Document.Status)
	require.NoError(t, imported[1].Err)
	require.Len(t, results, 1)
	require.Equal(t, imported[1].Document.ID, results[0].DocumentID)
	require.Equal(t, sifen.BatchSent, results[0].Result)
	require.Equal(t, []time.Duration{sifen.DefaultInterval}, slept)
	require.Equal(t, []sifen.EventKind{sifen.EventImported, sifen.EventImported, sifen.EventRefused, sifen.EventWaiting, sifen.EventLotSent, sifen.EventResult}, kinds)
}

// requireNoErr asserts that every file of des can be imported.
func requireNoErr(t *testing.T, des []sifen.FileDE) {
	t.Helper()
	for _, fd := range des {
		require.NoError(t, fd.Err)
	}
}
