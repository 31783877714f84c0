package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

type apiList struct {
	Buckets []map[string]any `json:"buckets"`
	Next    string           `json:"next"`
	NextURL string           `json:"next_url"`
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}

func TestAPIBucket(t *testing.T) {
	e := newEnv(t)
	k := key("SLOW", `ruc"<1>`)
	e.take(k, 30)
	// 4 s at 100/min (one token per 0.6 s) bring back 6 tokens and 2/3.
	e.clock.Advance(4 * time.Second)

	resp := e.get("/api/buckets/SLOW/prod/ruc%22%3C1%3E", asAdmin)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	got := decode[map[string]any](t, resp)
	want := map[string]any{
		"policy": "SLOW", "env": "prod", "identifier": `ruc"<1>`,
		"tokens": 76.0, "capacity": 100.0,
		"refill_tokens": 100.0, "refill_period_seconds": 60.0, "refill_mode": "continuous",
		"severity": "Healthy", "severity_level": 1.0, "state": "cooling down",
		"cooldown_remaining_seconds": 6.0, "block_remaining_seconds": 0.0,
		"retry_after_seconds": 6.0, "until_full_seconds": 14.0,
		"last_sent_at": "2026-01-02T03:04:05Z", "send_count": 1.0,
		"stored": true, "at": "2026-01-02T03:04:09Z",
	}
	require.Equal(t, want, got)

	// A key with no row is a full bucket.
	got = decode[map[string]any](t, e.get("/api/buckets/P/prod/nobody", asAdmin))
	require.Equal(t, false, got["stored"])
	require.Equal(t, 10.0, got["tokens"])
	require.Nil(t, got["last_sent_at"])
}

func TestAPIBucketErrors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		path   string
		opts   []reqOpt
		status int
	}{
		{"UnknownPolicy", "/api/buckets/NOPE/prod/x", []reqOpt{asAdmin}, http.StatusNotFound},
		{"InvalidKey", "/api/buckets/P/prod/%7F", []reqOpt{asAdmin}, http.StatusBadRequest},
		{"Unauthenticated", "/api/buckets/P/prod/x", nil, http.StatusUnauthorized},
		{"BadCursor", "/api/buckets?after=nope", []reqOpt{asAdmin}, http.StatusBadRequest},
		{"BadLimit", "/api/buckets?limit=-1", []reqOpt{asAdmin}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := e.get(tt.path, tt.opts...)
			require.Equal(t, tt.status, resp.StatusCode)
			got := decode[map[string]any](t, resp)
			require.Equal(t, float64(tt.status), got["status"])
			require.NotEmpty(t, got["error"])
			require.NotEmpty(t, got["request_id"])
		})
	}
}

func TestAPIBucketsPagination(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		e := newEnv(t, withStore(engine))
		var want []string
		for i := range 5 {
			id := fmt.Sprintf("payer/%d", i) // a slash inside the identifier
			want = append(want, id)
			e.take(key("P", id), 2)
		}
		e.take(throttle.Key{Policy: "P", Env: "test", Identifier: "other-env"}, 1)

		var got []string
		next := "/api/buckets?env=prod&limit=2"
		for pages := 1; next != ""; pages++ {
			require.LessOrEqual(t, pages, 3)
			resp := e.get(next, asAdmin)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			page := decode[apiList](t, resp)
			for _, b := range page.Buckets {
				got = append(got, b["identifier"].(string))
				require.Equal(t, 8.0, b["tokens"])
			}
			if page.NextURL != "" {
				require.NotEmpty(t, page.Next)
				require.Contains(t, page.NextURL, "env=prod")
				require.Contains(t, page.NextURL, "limit=2")
			}
			next = page.NextURL
		}
		require.Equal(t, want, got)
	})
}

func TestAPIBucketsEmpty(t *testing.T) {
	e := newEnv(t)
	got := decode[map[string]any](t, e.get("/api/buckets", asAdmin))
	require.Equal(t, map[string]any{"buckets": []any{}}, got)
}
