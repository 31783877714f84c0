package dictsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict/dictsim"
)

const (
	ispb  = "12345678"
	payer = "52998224725" // a PF payer: 100 tokens, 2/min
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newSim(t *testing.T, cfg dictsim.Config) (*dictsim.Server, string) {
	t.Helper()
	cfg.EntriesFile, cfg.FakeClock, cfg.Start = "../testdata/entries.csv", true, start
	srv, err := dictsim.NewServer(context.Background(), cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// e2e returns the n-th EndToEndId of the test.
func e2e(n int) string { return fmt.Sprintf("E%s202601020304%011d", ispb, n) }

func get(t *testing.T, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func lookup(t *testing.T, url, key, payer string, n int) (int, http.Header, string) {
	t.Helper()
	return get(t, url+"/api/v2/entries/"+key, map[string]string{
		"PI-RequestingParticipant": ispb, "PI-PayerId": payer, "PI-EndToEndId": e2e(n)})
}

// TestImportsNothingOfTheClient keeps the simulator an oracle: it shares no
// code with balde's client side.
func TestImportsNothingOfTheClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/balde-throttle/balde") && dep != "github.com/balde-throttle/balde/internal/simkit" {
			require.Equal(t, "github.com/balde-throttle/balde/dict/dictsim", dep, "dictsim imports a balde package")
		}
	}
}

// TestCountsAsTheDICT: admitted while the balance is positive, charged by
// outcome when answered, 429 with Retry-After until positive again.
func TestCountsAsTheDICT(t *testing.T) {
	sim, url := newSim(t, dictsim.Config{Category: "H"})
	// Five 404s take the PF payer from 100 to 0 (20 each).
	for i := range 5 {
		status, _, body := lookup(t, url, "naoexiste@example.com", payer, i)
		require.Equal(t, http.StatusNotFound, status, body)
		require.Contains(t, body, "EntryNotFound")
	}
	tokens, ok := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
	require.True(t, ok)
	require.Equal(t, int64(0), tokens)
	tokens, _ = sim.Balance("ENTRIES_READ_PARTICIPANT_ANTISCAN", ispb)
	require.Equal(t, int64(50-15), tokens, "category H: 50, a 404 costs 3")

	status, hdr, body := lookup(t, url, "naoexiste@example.com", payer, 5)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "30", hdr.Get("Retry-After"), "one token at 2/min")
	require.Contains(t, body, "<type>https://dict.pi.rsfn.net.br/api/v2/error/RateLimited</type>")
	require.NotContains(t, body, "violation", "the published problem does not name the bucket")
	tokens, _ = sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
	require.Equal(t, int64(0), tokens, "a 429 is charged nothing")

	_, err := sim.Advance(30 * time.Second)
	require.NoError(t, err)
	status, _, body = lookup(t, url, "maria.souza@example.com", payer, 6)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<Statistics>")
	require.Equal(t, int64(1), sim.Stats().Count("getEntry", 429))
	require.Equal(t, int64(5), sim.Stats().Count("getEntry", 404))
}

// TestInFlightLookupsAreChargedWhenAnswered: lookups admitted while the
// payer's bucket is positive are all charged when the DICT answers them, so
// seven unknown keys in flight together take a PF payer of 100 tokens to
// -40 — the overdraft a client must reserve against — and none gets a 429:
// each was admitted while the balance was positive. (Were they charged at
// admission, the sixth would find 0 and be refused.) The 2 s latency is the
// margin for all seven to be admitted before the first is charged.
func TestInFlightLookupsAreChargedWhenAnswered(t *testing.T) {
	sim, url := newSim(t, dictsim.Config{Latency: 2 * time.Second})
	const n = 7
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			req, err := http.NewRequest(http.MethodGet, url+"/api/v2/entries/naoexiste@example.com", nil)
			if err != nil {
				statuses <- 0
				return
			}
			req.Header.Set("PI-RequestingParticipant", ispb)
			req.Header.Set("PI-PayerId", payer)
			req.Header.Set("PI-EndToEndId", e2e(i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	for range n {
		select {
		case status := <-statuses:
			require.Equal(t, http.StatusNotFound, status)
		case <-time.After(20 * time.Second):
			t.Fatal("no answer within 20 s")
		}
	}
	tokens, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
	require.Equal(t, int64(100-n*20), tokens)
}

// TestManualExample: 5 tokens, a 404 -> -15, positive again after 8 min.
func TestManualExample(t *testing.T) {
	sim, url := newSim(t, dictsim.Config{NameEmptyBucket: true})
	for i := range 4 {
		lookup(t, url, "naoexiste@example.com", payer, i) // 100 -> 20
	}
	for i := range 15 {
		status, _, _ := lookup(t, url, "maria.souza@example.com", payer, 10+i) // 20 -> 5
		require.Equal(t, http.StatusOK, status)
	}
	status, _, _ := lookup(t, url, "naoexiste@example.com", payer, 30)
	require.Equal(t, http.StatusNotFound, status)
	tokens, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
	require.Equal(t, int64(-15), tokens)
	status, hdr, body := lookup(t, url, "maria.souza@example.com", payer, 31)
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "480", hdr.Get("Retry-After"))
	require.Contains(t, body, "<value>ENTRIES_READ_USER_ANTISCAN</value>", "NameEmptyBucket names it")
	_, err := sim.Advance(8 * time.Minute)
	require.NoError(t, err)
	status, _, _ = lookup(t, url, "maria.souza@example.com", payer, 32)
	require.Equal(t, http.StatusOK, status)
}

func TestPaymentCreditsOnce(t *testing.T) {
	sim, url := newSim(t, dictsim.Config{})
	status, _, _ := lookup(t, url, "maria.souza@example.com", payer, 1)
	require.Equal(t, http.StatusOK, status)
	pay := func(n int) (int, dictsim.PaymentResult) {
		resp, err := http.Post(url+"/sim/payments?endToEndId="+e2e(n), "", nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		var res dictsim.PaymentResult
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		return resp.StatusCode, res
	}
	code, res := pay(1)
	require.Equal(t, http.StatusOK, code)
	require.False(t, res.Duplicate)
	tokens, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
	require.Equal(t, int64(100), tokens, "99 + 1")
	code, res = pay(1)
	require.Equal(t, http.StatusOK, code)
	require.True(t, res.Duplicate)
	code, _ = pay(2)
	require.Equal(t, http.StatusNotFound, code)
}

func TestPoliciesFromItsOwnState(t *testing.T) {
	_, url := newSim(t, dictsim.Config{Category: "G"})
	hdr := map[string]string{"PI-RequestingParticipant": ispb}
	status, _, body := get(t, url+"/api/v2/policies/", hdr)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "<Category>G</Category>")
	require.Contains(t, body, "<AvailableTokens>250</AvailableTokens>\n            <Capacity>250</Capacity>\n            <RefillTokens>25</RefillTokens>\n            <RefillPeriodSec>60</RefillPeriodSec>\n            <Name>ENTRIES_READ_PARTICIPANT_ANTISCAN</Name>")
	status, _, body = get(t, url+"/api/v2/policies/POLICIES_LIST", hdr)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "<AvailableTokens>19</AvailableTokens>", "the listing was charged")
	status, _, _ = get(t, url+"/api/v2/policies/NOPE", hdr)
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = get(t, url+"/api/v2/policies/", nil)
	require.Equal(t, http.StatusForbidden, status)
}

func TestCheckKeysAtMost200(t *testing.T) {
	_, url := newSim(t, dictsim.Config{})
	post := func(n int) int {
		var b strings.Builder
		b.WriteString("<CheckKeysRequest><Keys>")
		for range n {
			b.WriteString("<Key>maria.souza@example.com</Key>")
		}
		b.WriteString("</Keys></CheckKeysRequest>")
		req, err := http.NewRequest(http.MethodPost, url+"/api/v2/keys/check", strings.NewReader(b.String()))
		require.NoError(t, err)
		req.Header.Set("PI-RequestingParticipant", ispb)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, post(200))
	require.Equal(t, http.StatusBadRequest, post(201))
}

func TestLatencyComesAfterTheCharge(t *testing.T) {
	sim, url := newSim(t, dictsim.Config{Latency: 200 * time.Millisecond})
	done := make(chan int, 1)
	go func() {
		status, _, _ := lookup(t, url, "naoexiste@example.com", payer, 1)
		done <- status
	}()
	require.Eventually(t, func() bool {
		tokens, _ := sim.Balance("ENTRIES_READ_USER_ANTISCAN", payer)
		return tokens == 80
	}, 2*time.Second, 5*time.Millisecond, "the 404 is charged before its answer reaches the client")
	select {
	case status := <-done:
		require.Equal(t, http.StatusNotFound, status)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
	}
}

func TestOpenLoopbackOnly(t *testing.T) {
	srv, err := dictsim.NewServer(context.Background(), dictsim.Config{})
	require.NoError(t, err)
	require.ErrorContains(t, srv.Open("0.0.0.0:0"), "loopback only")
	require.NoError(t, srv.Open("127.0.0.1:0"))
	require.True(t, strings.HasPrefix(srv.URL(), "http://127.0.0.1:"))
	require.NoError(t, srv.Close())
}

func TestConfigErrors(t *testing.T) {
	_, err := dictsim.NewServer(context.Background(), dictsim.Config{Category: "Z"})
	require.ErrorContains(t, err, "category")
	_, err = dictsim.ReadEntries(strings.NewReader("key\n"))
	require.ErrorContains(t, err, "header")
}
