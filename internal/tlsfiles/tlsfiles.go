// Package tlsfiles builds the HTTP client of a mutual-TLS peer (the DICT on
// the RSFN, SIFEN) from PEM files.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// Client returns an HTTP client over a clone of http.DefaultTransport whose
// TLS (1.2 at least) presents the certificate of certFile and keyFile (PEM;
// both or neither) and trusts the roots of caFile (PEM; empty: the
// system's); timeout bounds each request.
func Client(certFile, keyFile, caFile string, timeout time.Duration) (*http.Client, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("client certificate: set both the certificate and the key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		conf.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = conf
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}
