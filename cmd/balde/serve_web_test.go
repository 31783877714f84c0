package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

var (
	dictSimLine  = regexp.MustCompile(`^balde: DICT simulator on (http://127\.0\.0\.1:\d+) `)
	sifenSimLine = regexp.MustCompile(`^balde: SIFEN simulator on (http://127\.0\.0\.1:\d+)/\{env\} `)
)

// lineMatch returns the first group of the first line matching re.
func lineMatch(t *testing.T, lines []string, re *regexp.Regexp) string {
	t.Helper()
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no line matching %s in %q", re, lines)
	return ""
}

// adminClient talks to a running serve as the admin, without following
// redirects (the tests read Location).
type adminClient struct {
	t        *testing.T
	base     string
	user, pw string
	http     *http.Client
}

func newAdminClient(t *testing.T, base, user, pw string) *adminClient {
	return &adminClient{t: t, base: base, user: user, pw: pw, http: &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *adminClient) do(method, path string, body io.Reader, contentType string, header http.Header) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, body)
	require.NoError(c.t, err)
	req.SetBasicAuth(c.user, c.pw)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp, string(b)
}

func (c *adminClient) get(path string) (*http.Response, string) {
	c.t.Helper()
	return c.do(http.MethodGet, path, nil, "", nil)
}

func (c *adminClient) postForm(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	return c.do(http.MethodPost, path, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded", nil)
}

func (c *adminClient) upload(xml []byte, env string) (*http.Response, string) {
	c.t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	require.NoError(c.t, mw.WriteField("env", env))
	fw, err := mw.CreateFormFile("file", "lote.xml")
	require.NoError(c.t, err)
	_, err = fw.Write(xml)
	require.NoError(c.t, err)
	require.NoError(c.t, mw.Close())
	return c.do(http.MethodPost, "/documents", &b, mw.FormDataContentType(), nil)
}

// documentIDs lists the ids on the documents page, newest first.
func (c *adminClient) documentIDs() []string {
	c.t.Helper()
	resp, page := c.get("/documents")
	require.Equal(c.t, http.StatusOK, resp.StatusCode)
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
	require.NoError(c.t, err)
	var ids []string
	doc.Find("table.documents tbody tr td:first-child").Each(func(_ int, s *goquery.Selection) {
		ids = append(ids, strings.TrimSpace(s.Text()))
	})
	return ids
}

// TestServeWithSimulators is "make run" on a fresh clone: serve starts the
// DICT and SIFEN simulators, and the pages send through them.
func TestServeWithSimulators(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw"})
	dictURL := lineMatch(t, sm.before, dictSimLine)
	sifenURL := lineMatch(t, sm.before, sifenSimLine)
	c := newAdminClient(t, sm.url, "admin", "pw")

	// Upload a lot of two DEs of one RUC, send both: the second is blocked.
	resp, _ := c.upload(sifentest.Lote(sifentest.Docs("88888801", 1, 2)...), "test")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	ids := c.documentIDs()
	require.Len(t, ids, 2)
	first, second := ids[1], ids[0]
	resp, _ = c.postForm("/documents/"+first+"/send", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/documents/"+first+"?result=sent", resp.Header.Get("Location"))
	resp, _ = c.postForm("/documents/"+second+"/send", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Regexp(t, `^/documents/`+second+`\?result=blocked&wait=([1-9]|10)$`, resp.Header.Get("Location"))
	_, page := c.get("/documents/" + second)
	require.Regexp(t, `Blocked for RUC 88888801-5 in env test, retry in ([1-9]|10) s\.`, page)
	require.Equal(t, int64(1), sifenStats(t, sifenURL).Count("siRecepLoteDE", "test", "88888801", "0300"))

	// Look a key up in the DICT simulator's sample entries.
	resp, page = c.postForm("/dict/lookup", url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, page, "João Silva")

	// The mirror in the DICT's format, and the summary panels.
	resp, xml := c.do(http.MethodGet, "/policies/"+dict.PolicyEntriesReadParticipantAntiscan, nil, "",
		http.Header{dict.HeaderRequestingParticipant: {"12345678"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, dict.ContentTypeXML, resp.Header.Get("Content-Type"))
	var pol dict.GetPolicyResponse
	require.NoError(t, dict.Unmarshal([]byte(xml), &pol))
	require.Equal(t, int64(49999), pol.Policy.AvailableTokens)
	_, page = c.get("/admin/buckets")
	for _, want := range []string{"DICT participant", "DICT anti-scan monitors (24 h)", "SIFEN documents", `<td class="scope">RUC</td>`, `<td class="scope">USER</td>`, `<td class="scope">PSP</td>`} {
		require.Contains(t, page, want)
	}

	// Shutdown stops the simulators too.
	require.Equal(t, ExitOK, sm.stop(t))
	for _, u := range []string{dictURL + "/sim/stats", sifenURL + "/sim/stats"} {
		_, err := http.Get(u)
		require.Error(t, err, u)
	}
}

func sifenStats(t *testing.T, base string) sifensim.Stats {
	t.Helper()
	resp, err := http.Get(base + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st sifensim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// TestServeReconcilesWithARealDICT: against a configured DICT, serve
// reconciles at start and learns the participant's category.
func TestServeReconcilesWithARealDICT(t *testing.T) {
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{
		Category: "H",
		Logger:   slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(sim)
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, sim.Close())
	})
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":             "sqlite://" + filepath.Join(t.TempDir(), "balde.db"),
		"BALDE_ADMIN_PASSWORD": "pw",
		"BALDE_DICT_URL":       hs.URL,
	})
	require.Contains(t, sm.before, "balde: DICT at "+hs.URL)
	c := newAdminClient(t, sm.url, "admin", "pw")

	// The first reconciliation runs at start: poll for its effect.
	category := func() string {
		_, xml := c.do(http.MethodGet, "/policies/", nil, "", http.Header{dict.HeaderRequestingParticipant: {"12345678"}})
		var list dict.ListPoliciesResponse
		require.NoError(t, dict.Unmarshal([]byte(xml), &list))
		return list.Category
	}
	require.Eventually(t, func() bool { return category() == "H" }, 10*time.Second, 20*time.Millisecond,
		"serve learns category H from the DICT")
	require.Equal(t, int64(1), sim.Stats().Count(dict.OpListBucketStates, http.StatusOK))
}

// TestServePrunes: with a tiny retention and period, the maintenance loop
// deletes the ledger rows and DICT lookups of a lookup.
func TestServePrunes(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "balde.db")
	sm := runServeMain(t, map[string]string{
		"BALDE_DB":               db,
		"BALDE_ADMIN_PASSWORD":   "pw",
		"BALDE_PRUNE_EVERY":      "50ms",
		"BALDE_LEDGER_RETENTION": "1ms",
		// Under balde prune's 24 h floor: serve needs it said.
		"BALDE_LEDGER_RETENTION_FORCE": "on",
	})
	c := newAdminClient(t, sm.url, "admin", "pw")
	resp, _ := c.postForm("/dict/lookup", url.Values{"key": {"11144477735"}, "payer_id": {"52998224725"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	store, err := alldrivers.Open(context.Background(), db, sqlstore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	count := func(table string) int64 {
		var n int64
		require.NoError(t, store.ReadDB().Get(&n, "SELECT COUNT(*) FROM "+table))
		return n
	}
	// The lookup reached the DICT simulator, so it was recorded (a lookup
	// row, ledger rows): the prune below is not vacuous.
	resp, err = http.Get(lineMatch(t, sm.before, dictSimLine) + "/sim/stats")
	require.NoError(t, err)
	var stats dictsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&stats))
	resp.Body.Close()
	require.Equal(t, int64(1), stats.Count(dict.OpGetEntry, http.StatusOK))
	require.Eventually(t, func() bool { return count("balde_token_ledger") == 0 && count("balde_dict_lookups") == 0 },
		10*time.Second, 20*time.Millisecond, "the maintenance loop prunes")
}

func TestBackgroundConfig(t *testing.T) {
	tests := []struct {
		name          string
		env           map[string]string
		args          []string
		wantReconcile time.Duration
		wantPrune     time.Duration
		wantErr       string
	}{
		{"Defaults", nil, nil, settings.ReconcileAuto, balde.DefaultJobs().PruneEvery, ""},
		{"Env", map[string]string{"BALDE_DICT_RECONCILE_EVERY": "30s", "BALDE_PRUNE_EVERY": "1h"}, nil, 30 * time.Second, time.Hour, ""},
		{"Off", map[string]string{"BALDE_DICT_RECONCILE_EVERY": "off", "BALDE_PRUNE_EVERY": "0"}, nil, 0, 0, ""},
		{"FlagsWin", map[string]string{"BALDE_DICT_RECONCILE_EVERY": "off", "BALDE_PRUNE_EVERY": "1h"},
			[]string{"--dict-reconcile-every", "auto", "--prune-every", "off"}, settings.ReconcileAuto, 0, ""},
		{"ReconcileTooOften", map[string]string{"BALDE_DICT_RECONCILE_EVERY": "5s"}, nil, 0, 0, "BALDE_DICT_RECONCILE_EVERY: 5s is more often than POLICIES_LIST allows"},
		{"PruneNegative", map[string]string{"BALDE_PRUNE_EVERY": "-1m"}, nil, 0, 0, "BALDE_PRUNE_EVERY"},
		{"PruneGarbage", map[string]string{"BALDE_PRUNE_EVERY": "often"}, nil, 0, 0, "BALDE_PRUNE_EVERY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := settings.Default()
			err := cfg.ParseEnv(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg.AddFlags(fs, backgroundFlags...)
			require.NoError(t, fs.Parse(tt.args))
			require.Equal(t, tt.wantReconcile, cfg.DictReconcileEvery)
			require.Equal(t, tt.wantPrune, cfg.PruneEvery)
		})
	}
}

// TestServePaymentReachesTheSimulator is issue 12 #6 through serve: the
// demo's "payment sent" credits the simulator as well as the mirror, so the
// lookup it pays for is not refused by the simulator. The participant's
// anti-scan bucket (category H: 50 tokens) is brought to 0 on both sides,
// the payment gives it 1 back, and the next lookup must be answered. Before,
// only the mirror was credited: it admitted the lookup and the simulator
// answered 429.
func TestServePaymentReachesTheSimulator(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "balde.db")
	sm := runServeMain(t, map[string]string{"BALDE_DB": db, "BALDE_ADMIN_PASSWORD": "pw", "BALDE_DICT_CATEGORY": "H"})
	dictURL := lineMatch(t, sm.before, dictSimLine)
	c := newAdminClient(t, sm.url, "admin", "pw")
	const found, payer = "11144477735", "52998224725" // a sample entry, a PF payer
	lookup := func(key, payer string) (int, *goquery.Document) {
		t.Helper()
		resp, page := c.postForm("/dict/lookup", url.Values{"key": {key}, "payer_id": {payer}})
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(page))
		require.NoError(t, err)
		return resp.StatusCode, doc
	}

	// A found key (200): 1 token of the participant's 50; its EndToEndId
	// is the payment's.
	status, doc := lookup(found, payer)
	require.Equal(t, http.StatusOK, status)
	e2e, ok := doc.Find(`input[name="end_to_end_id"]`).Attr("value")
	require.True(t, ok, "the lookup page has the payment button")
	// 16 unknown keys (404, 3 tokens each) by 4 payers (20 tokens of their
	// 100 each), then a found key: 49 - 48 - 1 = 0 on both sides.
	for i := range 16 {
		status, _ = lookup(fmt.Sprintf("nobody%d@example.com", i), cpf(i/4))
		require.Equal(t, http.StatusNotFound, status, "lookup %d: the DICT answered 404", i)
	}
	status, _ = lookup(found, payer)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, int64(0), simTokens(t, dictURL, dict.PolicyEntriesReadParticipantAntiscan))

	// The payment: +1 to the participant at the simulator too.
	resp, page := c.postForm("/dict/payments", url.Values{"end_to_end_id": {e2e}})
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, page, "Credit applied.")
	require.Equal(t, int64(1), simTokens(t, dictURL, dict.PolicyEntriesReadParticipantAntiscan), "the simulator got the credit")

	// The next lookup is answered, not refused by the simulator.
	status, doc = lookup(found, payer)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, doc.Text(), "João Silva")
	st := dictStats(t, dictURL)
	require.Equal(t, int64(0), st.Total(http.StatusTooManyRequests), "remote 429s")
	require.Equal(t, int64(3), st.Count(dict.OpGetEntry, http.StatusOK))
	require.Equal(t, int64(16), st.Count(dict.OpGetEntry, http.StatusNotFound))
}

// cpf returns the n-th valid CPF of a series.
func cpf(n int) string {
	s := fmt.Sprintf("%09d", 300000000+n)
	for _, length := range []int{9, 10} {
		sum := 0
		for i := 0; i < length; i++ {
			sum += int(s[i]-'0') * (length + 1 - i)
		}
		s += strconv.Itoa(sum * 10 % 11 % 10)
	}
	return s
}

// simTokens reads the participant 12345678's bucket of policy at the DICT
// simulator (its own GET /policies/{policy}, charged to its POLICIES_READ
// only).
func simTokens(t *testing.T, base, policy string) int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+dict.APIPrefix+"/policies/"+policy, nil)
	require.NoError(t, err)
	req.Header.Set(dict.HeaderRequestingParticipant, "12345678")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var pol dict.GetPolicyResponse
	require.NoError(t, dict.Decode(resp.Body, &pol))
	return pol.Policy.AvailableTokens
}

func dictStats(t *testing.T, base string) dictsim.Stats {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + "/sim/stats")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st dictsim.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}
