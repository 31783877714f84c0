package dict

import (
	"fmt"
	"net/http"
	"time"

	"github.com/balde-throttle/balde/internal/tlsfiles"
)

// NewTLSClient returns an HTTP client for mutual TLS with the DICT: it
// presents the client certificate and key (PEM files) and trusts the CA
// bundle (a PEM file; empty: the system's roots). Certificate and key go
// together: both or neither. TLS 1.2 at least, 30 s timeout.
func NewTLSClient(certFile, keyFile, caFile string) (*http.Client, error) {
	hc, err := tlsfiles.Client(certFile, keyFile, caFile, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dict: %w", err)
	}
	return hc, nil
}
