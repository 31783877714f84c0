package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/templates"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// Every kind of error reads the same in every format an answer takes —
// the HTML page, JSON, the DICT's problem+xml and a SOAP 1.2 fault: one
// status, one Retry-After, one message (problemOf is the one mapper).
func TestOneErrorMapperEveryFormat(t *testing.T) {
	s := NewServer()
	s.Logger = slog.New(slog.DiscardHandler)
	pages, err := parsePages(templates.FS, pageFiles)
	require.NoError(t, err)
	s.pages = pages
	bucket := throttle.Key{Policy: dict.PolicyEntriesReadUserAntiscan, Env: "prod", Identifier: "11144477735"}
	refusal := throttle.Decision{Reason: throttle.ReasonEmpty, Key: bucket, RetryAfter: 300 * time.Millisecond}

	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter string
		message    string
		dictType   string
		soapCode   string
	}{
		{"BadInput", fmt.Errorf("dict: getEntry: %w: %q is not a key", dict.ErrInvalidKey, "x"), http.StatusBadRequest, "",
			`getEntry: invalid key: "x" is not a key`, "BadRequest", "env:Sender"},
		{"Refusal", &throttle.RefusedError{Op: "dict getEntry", Decision: refusal}, http.StatusTooManyRequests, "1",
			"dict getEntry refused locally: bucket " + bucket.String() + " is empty, retry in 300ms; nothing was sent, send again after 1 s",
			"RateLimited", "env:Receiver"},
		{"InboundLimit", &rateLimitError{Policy: "ip", RetryAfter: 2500 * time.Millisecond}, http.StatusTooManyRequests, "3",
			"too many requests (ip limit): retry in 2.5s", "RateLimited", "env:Receiver"},
		{"StoreUnavailable", fmt.Errorf("sqlstore: take: %w", throttle.ErrStoreUnavailable), http.StatusServiceUnavailable, "5",
			"the store is unavailable", "ServiceUnavailable", "env:Receiver"},
		{"Remote429", &dict.RemoteError{Op: "getEntry", Status: http.StatusTooManyRequests, RetryAfter: 7 * time.Second},
			http.StatusTooManyRequests, "7", "getEntry: remote status 429, retry after 7s", "RateLimited", "env:Receiver"},
		{"Remote500", &dict.RemoteError{Op: "getEntry", Status: http.StatusInternalServerError}, http.StatusBadGateway, "",
			"getEntry: remote status 500", "ServiceUnavailable", "env:Receiver"},
		{"RemoteNotFound", &dict.RemoteError{Op: "getEntry", Status: http.StatusNotFound}, http.StatusNotFound, "",
			"getEntry: remote status 404", "NotFound", "env:Sender"},
		{"Upstream", upstream("the DICT did not answer", false, errors.New("dial tcp 10.0.0.1:443: i/o timeout")), http.StatusBadGateway, "",
			"the DICT did not answer", "ServiceUnavailable", "env:Receiver"},
		{"NotFound", fmt.Errorf("%w: E1", dict.ErrUnknownEndToEndID), http.StatusNotFound, "",
			"no lookup with that EndToEndId: E1", "NotFound", "env:Sender"},
		{"Conflict", fmt.Errorf("%w: 0123", sifen.ErrCDCInFlight), http.StatusConflict, "",
			"CDC already sent: 0123", "BadRequest", "env:Sender"},
		{"Internal", errors.New("boom"), http.StatusInternalServerError, "", "internal error", "InternalServerError", "env:Receiver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/dict/lookup", nil)
			p := problemOf(r, tt.err)
			formats := map[string]func(w http.ResponseWriter){
				"html": func(w http.ResponseWriter) { s.writeErrorPage(w, r, p) },
				"json": func(w http.ResponseWriter) { p.writeJSON(w, "req-1") },
				"dict": func(w http.ResponseWriter) { p.writeXML(w, "") },
				"soap": func(w http.ResponseWriter) { p.writeSOAPFault(w) },
			}
			for name, render := range formats {
				w := httptest.NewRecorder()
				render(w)
				require.Equal(t, tt.status, w.Code, name)
				require.Equal(t, tt.retryAfter, w.Header().Get("Retry-After"), name)
				body := w.Body.Bytes()
				switch name {
				case "html":
					require.Contains(t, string(body), template.HTMLEscapeString(tt.message))
				case "json":
					var out struct {
						Status int    `json:"status"`
						Error  string `json:"error"`
					}
					require.NoError(t, json.Unmarshal(body, &out))
					require.Equal(t, tt.status, out.Status)
					require.Equal(t, tt.message, out.Error)
				case "dict":
					doc, err := dict.DecodeProblem(body)
					require.NoError(t, err)
					require.Equal(t, tt.status, doc.Status)
					require.Equal(t, tt.message, doc.Detail)
					require.Equal(t, tt.dictType, doc.TypeName())
				case "soap":
					_, fault, err := sifen.UnmarshalSOAP[sifen.EnvioLoteResponse](body)
					require.NoError(t, err)
					require.NotNil(t, fault)
					require.Equal(t, "balde: "+tt.message, fault.Reason)
					require.Equal(t, tt.soapCode, fault.Code)
				}
			}
		})
	}
}
