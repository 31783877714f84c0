package devsims

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSampleEntriesAreTheSample keeps the embedded copy of the sample
// entries equal to dict/testdata/entries.csv.
func TestSampleEntriesAreTheSample(t *testing.T) {
	want, err := os.ReadFile("../dict/testdata/entries.csv")
	require.NoError(t, err)
	require.Equal(t, string(want), string(sampleEntries), "copy dict/testdata/entries.csv to devsims/entries.csv")
}

// TestStart starts a simulator only for an endpoint left empty, returns
// the configured ones unchanged, and stops what it started on Close.
func TestStart(t *testing.T) {
	tests := []struct {
		name                string
		cfg                 Config
		wantDict, wantSifen bool
	}{
		{"both", Config{}, true, true},
		{"DICT configured", Config{DictURL: "https://dict.example"}, false, true},
		{"SIFEN configured", Config{SifenURL: "official", DictCategory: "C"}, true, false},
		{"none", Config{DictURL: "https://dict.example", SifenURL: "official"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := Start(ctx, tt.cfg)
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, tt.wantDict, s.Dict != nil)
			require.Equal(t, tt.wantSifen, s.Sifen != nil)
			if !tt.wantDict {
				require.Equal(t, tt.cfg.DictURL, s.DictURL)
			} else {
				require.Equal(t, s.Dict.URL(), s.DictURL)
				require.Positive(t, s.Entries)
				category := tt.cfg.DictCategory
				if category == "" {
					category = "A"
				}
				// The simulator answers as the DICT of the configured category.
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.DictURL+"/api/v2/policies/", nil)
				require.NoError(t, err)
				req.Header.Set("PI-RequestingParticipant", "12345678")
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Contains(t, string(body), "<Category>"+category+"</Category>")
			}
			if !tt.wantSifen {
				require.Equal(t, tt.cfg.SifenURL, s.SifenURL)
			} else {
				require.True(t, strings.HasSuffix(s.SifenURL, "/{env}"), s.SifenURL)
				require.Equal(t, s.Sifen.URL()+"/{env}", s.SifenURL)
			}
			require.NoError(t, s.Close())
			if tt.wantDict {
				_, err := http.Get(s.DictURL + "/policies/")
				require.Error(t, err, "the DICT simulator still listens after Close")
			}
		})
	}
}

// TestStartRefusesANonLoopbackAddress leaves nothing running when a
// simulator cannot listen.
func TestStartRefusesANonLoopbackAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, Config{SifenAddr: "192.0.2.1:0"})
	require.ErrorContains(t, err, "SIFEN simulator")
}
