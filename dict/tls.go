package dict

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// NewTLSClient returns an HTTP client for mutual TLS with the DICT: it
// presents the client certificate and key (PEM files) and trusts the CA
// bundle (a PEM file; empty: the system's roots). Certificate and key go
// together: both or neither. TLS 1.2 at least, 30 s timeout.
func NewTLSClient(certFile, keyFile, caFile string) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("dict: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("dict: client certificate: give both the certificate and the key (BALDE_DICT_CERT, BALDE_DICT_KEY)")
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("dict: CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("dict: CA bundle %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = cfg
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}, nil
}
