package settings

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"

	"github.com/balde-throttle/balde/web"
)

// Gateway are the settings of balde gateway (docs/decisions/0165): its
// clients (--clients, web.LoadGatewayClients), HTTPS pair and client CAs
// (--tls-cert, --tls-key, --client-ca) and each client's requests per
// window (--inbound-client-limit; 0: web's 10,000).
type Gateway struct {
	ClientsFile               string
	TLSCert, TLSKey, ClientCA string
	InboundClientLimit        int64
}

// GatewayAccess is how a gateway's clients reach it: Clients (nil with
// --no-client-auth), Authenticate (Clients', or "anonymous" for anyone) and
// TLS (nil without TLSCert).
type GatewayAccess struct {
	Clients      *web.GatewayClients
	Authenticate func(*http.Request) (string, bool)
	TLS          *tls.Config
}

// Scheme is https with TLS, else http.
func (a GatewayAccess) Scheme() string {
	if a.TLS != nil {
		return "https"
	}
	return "http"
}

// GatewayAccess checks and loads how a gateway's clients reach it: clients
// unless noAuth (loopback only, warned of); a certificate's client needs
// ClientCA, which needs TLSCert and TLSKey. A failure is a *Error.
func (g Gateway) GatewayAccess(addr string, noAuth bool, logger *slog.Logger) (GatewayAccess, error) {
	switch {
	case noAuth && !loopbackAddr(addr):
		return GatewayAccess{}, errorf("--no-client-auth serves anyone who reaches the gateway: it is for development on a loopback address, not %s", addr)
	case !noAuth && g.ClientsFile == "":
		return GatewayAccess{}, errorf("no client configured: set --clients FILE (BALDE_GATEWAY_CLIENTS_FILE), a line per client: NAME sha256:HEX (its bearer token's SHA-256) or NAME cn:NAME (its certificate, with --client-ca)")
	case (g.TLSCert == "") != (g.TLSKey == ""):
		return GatewayAccess{}, errorf("--tls-cert and --tls-key (BALDE_GATEWAY_TLS_CERT, BALDE_GATEWAY_TLS_KEY) go together")
	case g.ClientCA != "" && g.TLSCert == "":
		return GatewayAccess{}, errorf("--client-ca needs the gateway's own certificate: set --tls-cert and --tls-key")
	}
	a := GatewayAccess{Authenticate: func(*http.Request) (string, bool) { return "anonymous", true }}
	if !noAuth {
		var err error
		if a.Clients, err = web.LoadGatewayClients(g.ClientsFile, logger); err != nil {
			return GatewayAccess{}, errorf("BALDE_GATEWAY_CLIENTS_FILE: %v", err)
		}
		if a.Clients.Certificates() && g.ClientCA == "" {
			return GatewayAccess{}, errorf("BALDE_GATEWAY_CLIENTS_FILE names clients by certificate (cn:): set --client-ca and --tls-cert, --tls-key")
		}
		a.Authenticate = a.Clients.Authenticate
	}
	if g.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(g.TLSCert, g.TLSKey)
		if err != nil {
			return GatewayAccess{}, errorf("gateway TLS (--tls-cert, --tls-key): %v", err)
		}
		a.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if g.ClientCA != "" {
			pem, err := os.ReadFile(g.ClientCA)
			if err != nil {
				return GatewayAccess{}, errorf("--client-ca: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return GatewayAccess{}, errorf("--client-ca %s: no PEM certificate in it", g.ClientCA)
			}
			// A client may also come with a token and no certificate.
			a.TLS.ClientCAs, a.TLS.ClientAuth = pool, tls.VerifyClientCertIfGiven
		}
	}
	if noAuth {
		logger.Warn("--no-client-auth: the gateway serves anyone who reaches " + addr + " (development only)")
	}
	return a, nil
}

// loopbackAddr reports whether addr's host is loopback, loopback whether
// host is localhost or a loopback address.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopback(host)
}

func loopback(host string) bool {
	ip, err := netip.ParseAddr(host)
	return host == "localhost" || err == nil && ip.Unmap().IsLoopback()
}
