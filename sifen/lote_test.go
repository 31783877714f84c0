package sifen_test

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifentest"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func TestParseLoteTestdata(t *testing.T) {
	for _, tc := range []struct {
		file     string
		wantErr  error
		wantRUCs []string // one per DE, when parsing succeeds
		wantType int
		// wantLotErr is what Lote.Validate says about a file that parses.
		wantLotErr error
	}{
		{file: "de/valid_80069563.xml", wantRUCs: []string{"80069563-1"}, wantType: 1},
		{file: "de/valid_88888801.xml", wantRUCs: []string{"88888801-5"}, wantType: 5},
		{file: "de/valid_800695.xml", wantRUCs: []string{"800695-4"}, wantType: 1},
		{file: "de/valid_letters_A1234567.xml", wantRUCs: []string{"A1234567-3"}, wantType: 1},
		{file: "de/bad_dv_80069563.xml", wantErr: sifen.ErrInvalidDV},
		{file: "de/no_ruc.xml", wantErr: sifen.ErrMissingRUC},
		{file: "de/malformed_truncated.xml", wantErr: sifen.ErrMalformedXML},
		{file: "de/bad_cdc.xml", wantErr: sifen.ErrInvalidCDC},
		{file: "lote/valid_3_88888801.xml", wantRUCs: []string{"88888801-5", "88888801-5", "88888801-5"}, wantType: 1},
		{file: "lote/inherited_ns.xml", wantRUCs: []string{"80069563-1", "80069563-1"}, wantType: 1},
		{file: "lote/mixed_ruc.xml", wantRUCs: []string{"80069563-1", "88888801-5"}, wantType: 1, wantLotErr: sifen.ErrLotMixedRUC},
		{file: "lote/mixed_type.xml", wantRUCs: []string{"80069563-1", "80069563-1"}, wantType: 1, wantLotErr: sifen.ErrLotMixedTypes},
		{file: "lote/bad_dv_second.xml", wantErr: sifen.ErrInvalidDV},
	} {
		t.Run(tc.file, func(t *testing.T) {
			lot, err := sifen.ParseLote(readTestdata(t, tc.file))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			var rucs []string
			for _, de := range lot.DEs {
				rucs = append(rucs, de.RUC.String())
				require.Len(t, de.CDC, 44)
			}
			require.Equal(t, tc.wantRUCs, rucs)
			require.Equal(t, tc.wantType, lot.DEs[0].Type)
			if tc.wantLotErr != nil {
				require.ErrorIs(t, lot.Validate(), tc.wantLotErr)
			} else {
				require.NoError(t, lot.Validate())
			}
		})
	}
}

func TestParseLoteErrorNamesTheDE(t *testing.T) {
	_, err := sifen.ParseLote(readTestdata(t, "lote/bad_dv_second.xml"))
	require.ErrorIs(t, err, sifen.ErrInvalidDV)
	require.ErrorContains(t, err, "DE 2 of the lot")
	require.ErrorContains(t, err, "the check digit of 800695 is 4")
}

func TestParseLoteStandaloneDEs(t *testing.T) {
	// The rDE elements of this lot inherit their namespaces from rLoteDE;
	// each extracted DE must parse on its own and mean the same.
	lot, err := sifen.ParseLote(readTestdata(t, "lote/inherited_ns.xml"))
	require.NoError(t, err)
	for _, de := range lot.DEs {
		require.True(t, bytes.HasPrefix(de.XML, []byte(`<rDE xmlns="`+sifen.Namespace+`" xmlns:xsi=`)), "%s", de.XML[:80])
		again, err := sifen.ParseLote(de.XML)
		require.NoError(t, err)
		require.Equal(t, []sifen.DE{de}, again.DEs)
	}
	// The rebuilt lot parses to the same DEs.
	again, err := sifen.ParseLote(lot.XML())
	require.NoError(t, err)
	require.Equal(t, lot.DEs, again.DEs)
}

func TestParseLoteKeepsDEBytes(t *testing.T) {
	doc := sifentest.Doc{Number: 7}
	lot, err := sifen.ParseLote(sifentest.Lote(doc))
	require.NoError(t, err)
	require.Equal(t, doc.XML(), lot.DEs[0].XML)
	require.Equal(t, doc.CDC(), lot.DEs[0].CDC)
}

func TestParseLoteRejects(t *testing.T) {
	de := string(sifentest.Doc{}.XML())
	for _, tc := range []struct {
		name    string
		in      string
		wantErr error
	}{
		{"Empty", "", sifen.ErrMalformedXML},
		{"OtherRoot", `<foo/>`, sifen.ErrMalformedXML},
		{"RDEWithoutNamespace", `<rDE><DE/></rDE>`, sifen.ErrMalformedXML},
		{"Doctype", `<!DOCTYPE x [<!ENTITY a "b">]>` + de, sifen.ErrMalformedXML},
		{"TwoRoots", de + de, sifen.ErrMalformedXML},
		{"TextAfter", de + "x", sifen.ErrMalformedXML},
		{"OtherChildInLot", `<rLoteDE xmlns="` + sifen.Namespace + `"><x/></rLoteDE>`, sifen.ErrMalformedXML},
		{"Latin1", `<?xml version="1.0" encoding="ISO-8859-1"?>` + de, sifen.ErrMalformedXML},
		{"TwoRUCs", string(bytes.Replace([]byte(de), []byte("<dRucEm>"), []byte("<dRucEm>80069563</dRucEm><dRucEm>"), 1)), sifen.ErrMalformedXML},
		{"NoType", string(bytes.Replace([]byte(de), []byte("<iTiDE>1</iTiDE>"), nil, 1)), sifen.ErrInvalidType},
		{"NoCDC", string(bytes.Replace([]byte(de), []byte(` Id="`+sifentest.Doc{}.CDC()+`"`), nil, 1)), sifen.ErrInvalidCDC},
		{"CDCOfOtherType", string(sifentest.Doc{Type: 5}.XML()[:0]) + string(bytes.Replace([]byte(de), []byte("<iTiDE>1</iTiDE>"), []byte("<iTiDE>5</iTiDE>"), 1)), sifen.ErrInvalidCDC},
		{"CDCOfOtherRUC", string(bytes.Replace([]byte(de), []byte("<dRucEm>80069563</dRucEm><dDVEmi>1</dDVEmi>"), []byte("<dRucEm>88888801</dRucEm><dDVEmi>5</dDVEmi>"), 1)), sifen.ErrInvalidCDC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sifen.ParseLote([]byte(tc.in))
			require.ErrorIs(t, err, tc.wantErr)
		})
	}
}

func TestLotePack(t *testing.T) {
	parse := func(t *testing.T, docs ...sifentest.Doc) sifen.Lote {
		t.Helper()
		lot, err := sifen.ParseLote(sifentest.Lote(docs...))
		require.NoError(t, err)
		return lot
	}
	t.Run("OK50", func(t *testing.T) {
		lot := parse(t, sifentest.Docs("80069563", 1, sifen.MaxLotDEs)...)
		p, err := lot.Pack()
		require.NoError(t, err)
		doc, err := sifen.UnzipLote(p.Zip)
		require.NoError(t, err)
		require.Equal(t, p.XML, doc)
		require.Len(t, p.Hash, 64)
		// Same DEs, same lot: identical bytes and hash.
		p2, err := lot.Pack()
		require.NoError(t, err)
		require.Equal(t, p, p2)
	})
	t.Run("ErrLotTooManyDEs", func(t *testing.T) {
		_, err := parse(t, sifentest.Docs("80069563", 1, sifen.MaxLotDEs+1)...).Pack()
		require.ErrorIs(t, err, sifen.ErrLotTooManyDEs)
	})
	t.Run("ErrLotEmpty", func(t *testing.T) {
		_, err := sifen.Lote{}.Pack()
		require.ErrorIs(t, err, sifen.ErrLotEmpty)
	})
	t.Run("ErrLotDuplicateCDC", func(t *testing.T) {
		_, err := parse(t, sifentest.Doc{Number: 1}, sifentest.Doc{Number: 1}).Pack()
		require.ErrorIs(t, err, sifen.ErrLotDuplicateCDC)
	})
	t.Run("ErrLotTooBig", func(t *testing.T) {
		docs := sifentest.Docs("80069563", 1, 40)
		for i := range docs {
			docs[i].Filler = 40_000
		}
		_, err := parse(t, docs...).Pack()
		require.ErrorIs(t, err, sifen.ErrLotTooBig)
	})
}

func TestUnzipLoteRejects(t *testing.T) {
	_, err := sifen.UnzipLote([]byte("not a zip"))
	require.ErrorIs(t, err, sifen.ErrMalformedXML)
}

func FuzzParseLote(f *testing.F) {
	for _, name := range []string{
		"de/valid_80069563.xml", "de/valid_letters_A1234567.xml", "de/bad_dv_80069563.xml", "de/no_ruc.xml",
		"de/malformed_truncated.xml", "de/bad_cdc.xml", "lote/valid_3_88888801.xml", "lote/inherited_ns.xml",
		"lote/mixed_ruc.xml", "lote/bad_dv_second.xml",
	} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte(`<s:rLoteDE xmlns:s="` + sifen.Namespace + `"><s:rDE/></s:rLoteDE>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lot, err := sifen.ParseLote(data)
		if err != nil {
			return
		}
		require.NotEmpty(t, lot.DEs)
		for _, de := range lot.DEs {
			// Everything that parses is valid, and stands alone.
			require.NoError(t, de.RUC.Validate())
			require.NoError(t, sifen.ValidateCDC(de.CDC, de.Type, de.RUC))
			alone, err := sifen.ParseLote(de.XML)
			require.NoError(t, err, "%q", de.XML)
			require.Equal(t, []sifen.DE{de}, alone.DEs)
		}
		// The lot rebuilt from its DEs parses to the same DEs.
		again, err := sifen.ParseLote(lot.XML())
		require.NoError(t, err)
		require.Equal(t, lot.DEs, again.DEs)
	})
}

// A DE nested 30,000 deep (issue 13) is refused, fast: parsing joined the
// whole element path on every element, which took seconds at this depth
// and kept serve busy for minutes at 500,000.
func TestParseLoteRefusesDeepNesting(t *testing.T) {
	const depth = 30_000
	valid := sifentest.Doc{}.XML()
	i := bytes.Index(valid, []byte("<gDatRec>"))
	require.Positive(t, i)
	var deep bytes.Buffer
	deep.Write(valid[:i])
	deep.WriteString(strings.Repeat("<x>", depth))
	deep.WriteString(strings.Repeat("</x>", depth))
	deep.Write(valid[i:])

	start := time.Now()
	_, err := sifen.ParseLote(deep.Bytes())
	require.ErrorIs(t, err, sifen.ErrMalformedXML)
	require.ErrorContains(t, err, "nested deeper than 64")
	require.Less(t, time.Since(start), time.Second, "refusing a deep DE must be fast")

	// A cancelled context stops the parse.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = sifen.ParseLoteContext(ctx, valid)
	require.ErrorIs(t, err, context.Canceled)
}

// Issue 11, wire form: the lot balde zips is written as DNIT's example
// (rLoteDE without a namespace, each rDE with its own); a lot in that form,
// and a file with a UTF-8 byte order mark, are read too.
func TestLotWireForm(t *testing.T) {
	docs := sifentest.Docs("80069563", 1, 2)
	lot, err := sifen.ParseLote(sifentest.Lote(docs...))
	require.NoError(t, err)
	x := string(lot.XML())
	require.True(t, strings.HasPrefix(x, `<?xml version="1.0" encoding="UTF-8"?><rLoteDE><rDE xmlns="`+sifen.Namespace+`"`), x[:120])
	again, err := sifen.ParseLote(lot.XML())
	require.NoError(t, err)
	require.Equal(t, lot, again)

	bom, err := sifen.ParseLote(append([]byte("\xef\xbb\xbf"), docs[0].File()...))
	require.NoError(t, err)
	require.Equal(t, docs[0].CDC(), bom.DEs[0].CDC)
	require.True(t, bom.DEs[0].Signed)
	require.True(t, bom.DEs[0].TestIssuer)
}

// Issue 11, lot size: DNIT's 1000 KB is the SOAP message as sent; a ZIP of
// 990 KB went out as a 1.32 MB message.
func TestPackChecksTheMessageNotTheZip(t *testing.T) {
	require.NoError(t, sifen.CheckMessageSize(700*1024))
	err := sifen.CheckMessageSize(990 * 1024)
	require.ErrorIs(t, err, sifen.ErrLotTooBig)
	require.Greater(t, sifen.MessageSize(990*1024), 1300*1024)
	// The largest ZIP that fits: 3/4 of the limit, less the envelope.
	limit := 0
	for n := 700 * 1024; n < 780*1024; n++ {
		if sifen.CheckMessageSize(n) != nil {
			limit = n - 1
			break
		}
	}
	require.LessOrEqual(t, sifen.MessageSize(limit), sifen.MaxLotMessageBytes)
	require.Greater(t, sifen.MessageSize(limit+1), sifen.MaxLotMessageBytes)
}

// Issue 11: a DE with more items than the schema allows (gCamItem,
// maxOccurs 999) is refused.
func TestParseLoteRefusesTooManyItems(t *testing.T) {
	valid := sifentest.Doc{}.XML()
	i := bytes.Index(valid, []byte("<gCamItem>"))
	j := bytes.Index(valid, []byte("</gCamItem>")) + len("</gCamItem>")
	item := valid[i:j]
	build := func(n int) []byte {
		var b bytes.Buffer
		b.Write(valid[:i])
		b.Write(bytes.Repeat(item, n))
		b.Write(valid[j:])
		return b.Bytes()
	}
	_, err := sifen.ParseLote(build(999))
	require.NoError(t, err)
	_, err = sifen.ParseLote(build(1000))
	require.ErrorIs(t, err, sifen.ErrMalformedXML)
	require.ErrorContains(t, err, "more than 999 items")
}

// Issue 22, item 2: DNIT's "1000 KB" is read as 1,000,000 bytes of the
// whole SOAP message (decision 0045). The 1,012,146-byte message "Send all
// drafts" built under the 1,024,000-byte reading is too big.
func TestMessageSizeBoundary(t *testing.T) {
	require.Equal(t, 1_000_000, sifen.MaxLotMessageBytes)
	tests := []struct {
		bytes int
		fits  bool
	}{
		{999_999, true},
		{1_000_000, true},
		{1_000_001, false},
		{1_012_146, false},
		{1000 * 1024, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.bytes), func(t *testing.T) {
			err := sifen.CheckMessageBytes(tt.bytes)
			if tt.fits {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, sifen.ErrLotTooBig)
			require.ErrorContains(t, err, "at most 1000000")
		})
	}
	// Through a ZIP: the largest that fits makes a message of at most
	// 1,000,000 bytes and within one base64 quantum of it.
	zipLen := 0
	for n := 740_000; n < 760_000; n++ {
		if sifen.CheckMessageSize(n) != nil {
			zipLen = n - 1
			break
		}
	}
	require.Positive(t, zipLen)
	require.LessOrEqual(t, sifen.MessageSize(zipLen), 1_000_000)
	require.Greater(t, sifen.MessageSize(zipLen), 1_000_000-4)
	require.Greater(t, sifen.MessageSize(zipLen+1), 1_000_000)
}

// bomb returns the ZIP of an rLoteDE holding n bytes of spaces: a few
// hundred KB that inflate to n.
func bomb(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "lote.xml", Method: zip.Deflate})
	require.NoError(t, err)
	_, err = f.Write([]byte("<rLoteDE>"))
	require.NoError(t, err)
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for left := n; left > 0; left -= len(spaces) {
		_, err = f.Write(spaces[:min(left, len(spaces))])
		require.NoError(t, err)
	}
	_, err = f.Write([]byte("</rLoteDE>"))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// ParseLoteZip reads what ParseLote reads, from the ZIP of xDE, and
// inflates no more than a lot file may hold (8 MiB): a ZIP bomb is
// ErrLotTooBig after a bounded cost, the DEs' other text is not kept.
func TestParseLoteZip(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		doc := sifentest.Lote(sifentest.Docs("80069563", 1, 3)...)
		want, err := sifen.ParseLote(doc)
		require.NoError(t, err)
		for _, in := range [][]byte{doc, append([]byte("\xef\xbb\xbf"), doc...)} {
			z, err := sifen.ZipLote(in)
			require.NoError(t, err)
			got, err := sifen.ParseLoteZip(context.Background(), z)
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
	})
	t.Run("ErrMalformedXML", func(t *testing.T) {
		_, err := sifen.ParseLoteZip(context.Background(), []byte("not a zip"))
		require.ErrorIs(t, err, sifen.ErrMalformedXML)
		z, err := sifen.ZipLote([]byte("<rLoteDE><rDE"))
		require.NoError(t, err)
		_, err = sifen.ParseLoteZip(context.Background(), z)
		require.ErrorIs(t, err, sifen.ErrMalformedXML)
	})
	t.Run("ErrLotTooBig", func(t *testing.T) {
		z := bomb(t, 100<<20)
		require.Less(t, len(z), 1_000_000, "a bomb that fits in a lot's message")
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := sifen.ParseLoteZip(context.Background(), z)
		runtime.ReadMemStats(&after)
		require.ErrorIs(t, err, sifen.ErrLotTooBig)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(48<<20), "bytes allocated reading a 100 MB bomb")
		_, err = sifen.UnzipLote(z)
		require.ErrorIs(t, err, sifen.ErrLotTooBig)
	})
	t.Run("EightMiBFits", func(t *testing.T) {
		z := bomb(t, 8<<20-len("<rLoteDE></rLoteDE>"))
		_, err := sifen.ParseLoteZip(context.Background(), z)
		require.ErrorIs(t, err, sifen.ErrLotEmpty, "read to its end")
	})
}
